import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { envelopeProblem } from '../src/session/envelope.js'
import { createJsonlPersistence, isSessionPersistenceError, type SessionEvent, SessionEventSchema } from '../src/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { rejection } from './helpers/codes.js'

describe('E_NOT_JSON names the event type, its seq, the path and what was found (docs/contract.md §4.3)', () => {
  class Point {
    x = 1
  }
  const cyclic: Record<string, unknown> = { a: 1 }
  cyclic.self = cyclic
  const cases: [unknown, string][] = [
    [{ content: [{}, {}, 10n] }, 'data.content[2] is a BigInt'],
    [{ f: () => 1 }, 'data.f is a function'],
    [{ s: Symbol('x') }, 'data.s is a Symbol'],
    [{ n: Number.NaN }, 'data.n is NaN'],
    [{ n: [Number.POSITIVE_INFINITY] }, 'data.n[0] is Infinity'],
    [{ d: new Date(0) }, 'data.d is a Date'],
    [{ m: new Map() }, 'data.m is a Map'],
    [{ p: new Point() }, 'data.p is a Point'],
    [{ 'odd key': { u: [undefined] } }, 'data["odd key"].u[0] is undefined'],
    [cyclic, 'data.self is a circular reference'],
    [new Uint8Array(2), 'data is a Uint8Array'],
  ]
  test.each(cases)('%o → %s', async (data, expected) => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('j'))
    const err = await rejection(p.append('j', [{ seq: 0, type: 'tool/result', time: 1, data } as SessionEvent]))
    expect(err.code).toBe('E_NOT_JSON')
    expect(err.message).toBe(`event 'tool/result' (seq 0): ${expected}`)
    await p.closeAll()
    expect(await p.list()).toEqual([])
  })

  test('extra fields are checked too, and undefined properties are allowed and omitted', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('k'))
    const err = await rejection(p.append('k', [{ seq: 0, type: 'x', time: 1, meta: { at: 5n } } as unknown as SessionEvent]))
    expect([err.code, err.message]).toEqual(['E_NOT_JSON', "event 'x' (seq 0): meta.at is a BigInt"])
    await p.append('k', [{ seq: 0, type: 'x', time: 1, data: { a: undefined, b: 2 }, ignorable: undefined, extra: undefined } as unknown as SessionEvent])
    await p.closeAll()
    expect((await p.inspect('k')).events).toEqual([{ seq: 0, type: 'x', time: 1, data: { b: 2 } }])
  })

  test('shared (non-cyclic) references are plain JSON', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('shared'))
    const block = { type: 'text', text: 'same' }
    await p.append('shared', [{ seq: 0, type: 'x', time: 1, data: [block, block] }])
    await p.closeAll()
    expect((await p.inspect('shared')).events[0]?.data).toEqual([block, block])
  })
})

test('property: the allocation-free JSON check agrees with the precise walk', async () => {
  const { isPlainJson, plainJsonProblem } = await import('../src/session/json-check.js')
  const odd = fc.oneof(
    fc.constant(undefined),
    fc.constant(Number.NaN),
    fc.constant(Number.POSITIVE_INFINITY),
    fc.bigInt(),
    fc.constant(new Date(0)),
    fc.constant(() => 1),
    fc.constant(Symbol('s')),
  )
  const value = fc.letrec((tie) => ({
    node: fc.oneof({ depthSize: 'small' }, fc.jsonValue({ maxDepth: 1 }), odd, fc.array(tie('node'), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 3 }), tie('node'), { maxKeys: 3 })),
  })).node
  fc.assert(
    fc.property(value, (v) => {
      expect(isPlainJson(v)).toBe(plainJsonProblem(v, 'data') === undefined)
    }),
    { numRuns: 5000 },
  )
  let deep: unknown = 1
  for (let i = 0; i < 200; i++) deep = [deep]
  expect(isPlainJson(deep)).toBe(false) // gives up past its depth limit…
  expect(plainJsonProblem(deep, 'data')).toBeUndefined() // …and the precise walk accepts it
})

describe('the hot-path envelope check agrees with the zod schema (the schema is the source of truth)', () => {
  const near = fc.record(
    {
      seq: fc.oneof(fc.integer({ min: -3, max: 5 }), fc.double(), fc.constant(2 ** 53), fc.string(), fc.constant(null)),
      type: fc.oneof(fc.string({ maxLength: 3 }), fc.integer(), fc.constant(null)),
      time: fc.oneof(fc.double(), fc.integer(), fc.string(), fc.constant(null)),
      ignorable: fc.oneof(fc.constant(true), fc.constant(false), fc.constant(1), fc.constant('true'), fc.constant(null)),
      data: fc.jsonValue({ maxDepth: 2 }),
      other: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: [] },
  )
  test('for JSON-parsed values, envelopeProblem(v) is undefined exactly when the schema accepts v', () => {
    fc.assert(
      fc.property(fc.oneof(near, fc.jsonValue({ maxDepth: 2 })), (value) => {
        const parsed: unknown = JSON.parse(JSON.stringify(value) ?? 'null')
        expect(envelopeProblem(parsed) === undefined).toBe(SessionEventSchema.safeParse(parsed).success)
      }),
      { numRuns: 20_000 },
    )
  })

  test('invalid envelopes are E_INVALID_EVENT', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('env'))
    for (const bad of [null, 5, [], { seq: 0, type: 'x' }, { seq: 0.5, type: 'x', time: 1 }, { seq: 0, type: 'x', time: 1, ignorable: 'yes' }]) {
      expect((await rejection(p.append('env', [bad as SessionEvent]))).code).toBe('E_INVALID_EVENT')
    }
    expect((await rejection(p.append('env', 'nope' as unknown as SessionEvent[]))).code).toBe('E_INVALID_EVENT')
    await p.closeAll()
  })
})

describe('round trip (property)', () => {
  test('random JSON events load back deep-equal', async () => {
    const root = await tmpRoot()
    const event = fc.record(
      {
        type: fc.string({ minLength: 1, maxLength: 12 }),
        time: fc.double({ noNaN: true, noDefaultInfinity: true }).map((t) => (Object.is(t, -0) ? 0 : t)),
        data: fc.jsonValue({ maxDepth: 3 }),
        ignorable: fc.constant(true as const),
        note: fc.string(),
      },
      { requiredKeys: ['type', 'time'] },
    )
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(event, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 4 }), async (batches) => {
        const id = `rt-${n++}`
        const p = createJsonlPersistence({ root, sync: 'none' })
        await p.create(meta(id))
        const all: SessionEvent[] = []
        for (const batch of batches) {
          const events = batch.map((e) => ({ seq: all.length, ...e }) as SessionEvent).map((e, i) => ({ ...e, seq: all.length + i }))
          await p.append(id, events)
          all.push(...(JSON.parse(JSON.stringify(events)) as SessionEvent[]))
        }
        await p.close(id)
        const loaded = await p.load(id, { closeOpenTurn: false })
        expect(loaded.events).toEqual(all)
        await p.close(id)
      }),
      { numRuns: 150 },
    )
  })
})

test('isSessionPersistenceError filters by code', async () => {
  const root = await tmpRoot()
  const err = await rejection(createJsonlPersistence({ root }).load('none'))
  expect(isSessionPersistenceError(err)).toBe(true)
  expect(isSessionPersistenceError(err, 'E_NOT_FOUND')).toBe(true)
  expect(isSessionPersistenceError(err, 'E_CORRUPT')).toBe(false)
  expect(isSessionPersistenceError(new Error('x'))).toBe(false)
})
