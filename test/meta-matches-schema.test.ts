import { readFile } from 'node:fs/promises'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { knownValidHeader, knownValidMeta } from '../src/session/meta-check.js'
import { ParsedHeaderSchema } from '../src/session/schema.js'
import { headerLine, validateMeta } from '../src/session/meta.js'
import { MAX_HEADER_BYTES } from '../src/session/header-line.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { createJsonlPersistence, type SessionMeta, SessionMetaSchema } from '../src/index.js'
import { codeOf, rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// knownValidMeta is the hot-path twin of SessionMetaSchema: what it accepts, zod accepts, with
// the same result (key order included); what zod accepts, it accepts too (but for a `__proto__`
// key at any depth, which it leaves to zod).

// Mostly valid values, some of every way to be wrong, so that both sides are reached often.
const count = fc.oneof(
  { arbitrary: fc.nat(), weight: 8 },
  { arbitrary: fc.integer({ min: -5, max: -1 }), weight: 1 },
  { arbitrary: fc.constantFrom(-0, 0.5, 2 ** 53, 2 ** 53 - 1, 1e300), weight: 1 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
  { arbitrary: fc.constantFrom('1', null, true, undefined), weight: 1 },
)
const text = fc.oneof(
  { arbitrary: fc.string({ minLength: 1, maxLength: 6 }).map((s) => `/${s}`), weight: 6 },
  { arbitrary: fc.string({ maxLength: 6 }), weight: 2 },
  { arbitrary: fc.constantFrom('', '/abs', 'rel', './x', 'C:\\x', null, 3, undefined), weight: 1 },
)
const extraKey = fc.oneof(
  { arbitrary: fc.string({ maxLength: 5 }), weight: 6 },
  { arbitrary: fc.constantFrom('type', 'version', '__proto__', 'constructor', 'toString', 'id'), weight: 1 },
)
// A `__proto__` key inside a value as JSON.parse makes it (an own property), which zod drops.
const protoInside = fc.constantFrom('{"__proto__":{"a":1},"b":2}', '[{"__proto__":0}]', '{"c":{"__proto__":[]}}', '["__proto__"]').map((t) => JSON.parse(t) as unknown)
const extraValue = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 6 },
  { arbitrary: fc.constantFrom(undefined, -0), weight: 1 },
  { arbitrary: protoInside, weight: 1 },
)

const nearMeta = fc
  .tuple(
    fc.record(
      { id: text, createdAt: count, cwd: text, parentSession: text, seedLength: count, delegationDepth: count },
      { requiredKeys: [] },
    ).chain((fields) =>
      // Most cases have every required field (then invalid only by value).
      fc.boolean().map((complete) => (complete ? { id: 'i', createdAt: 0, delegationDepth: 0, ...fields } : fields)),
    ),
    fc.array(fc.tuple(extraKey, extraValue), { maxLength: 3 }),
    fc.boolean(),
  )
  .map(([known, extras, extrasFirst]) => {
    // Own properties whatever the key (`__proto__` too), in either order.
    const out: Record<string, unknown> = {}
    const put = (k: string, v: unknown) => Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true })
    const knownEntries = Object.entries(known)
    for (const [k, v] of extrasFirst ? [...extras, ...knownEntries] : [...knownEntries, ...extras]) put(k, v)
    return out
  })

describe('knownValidMeta agrees with SessionMetaSchema (property)', () => {
  test('accepted: zod accepts and returns the same meta; refused: zod refuses too (__proto__ keys aside)', () => {
    fc.assert(
      fc.property(nearMeta, (value) => {
        const viaZod = SessionMetaSchema.safeParse(JSON.parse(JSON.stringify(value)))
        const fast = knownValidMeta(value)
        if (fast) {
          expect(viaZod.success).toBe(true)
          expect(JSON.stringify(fast)).toBe(JSON.stringify(viaZod.data))
          expect(Object.keys(fast)).toEqual(Object.keys(viaZod.data ?? {}))
          expect(fast).toEqual(viaZod.data) // -0 and 0 differ here
        } else if (!JSON.stringify(value).includes('"__proto__"')) {
          expect(viaZod.success).toBe(false)
        }
      }),
      { numRuns: 30_000 },
    )
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close

  test('the generator reaches both sides (the property is not vacuous)', () => {
    const samples = fc.sample(nearMeta, { numRuns: 5_000, seed: 7 })
    const accepted = samples.filter((v) => knownValidMeta(v) !== undefined).length
    expect(accepted).toBeGreaterThan(50)
    expect(samples.length - accepted).toBeGreaterThan(50)
  })

  test('validateMeta returns a copy: nested values are not shared, -0 is 0, undefined fields are gone', () => {
    const nested = { a: [1, { b: 2 }] }
    const given = { id: 'x', createdAt: -0, delegationDepth: 0, cwd: undefined, extra: nested, gone: undefined }
    const valid = validateMeta(given)
    expect(JSON.stringify(Object.keys(valid))).toBe('["id","createdAt","delegationDepth","extra"]')
    expect(Object.is(valid.createdAt, 0)).toBe(true)
    expect(valid.extra).toEqual(nested)
    expect(valid.extra).not.toBe(nested)
  })

  test('a known field that is not an own enumerable key is judged as the JSON copy zod sees', async () => {
    const hidden = { createdAt: 1, delegationDepth: 0 }
    Object.defineProperty(hidden, 'id', { value: 'x', enumerable: false })
    expect(knownValidMeta(hidden)).toBeUndefined()
    expect(await codeOf(Promise.resolve().then(() => validateMeta(hidden)))).toBe('E_INVALID_META')
    const depthHidden = { id: 'y', createdAt: 1 }
    Object.defineProperty(depthHidden, 'delegationDepth', { value: 0, enumerable: false })
    expect(await codeOf(Promise.resolve().then(() => validateMeta(depthHidden)))).toBe('E_INVALID_META')
  })
})

// knownValidHeader is the readers' twin of ParsedHeaderSchema, over line 1 as JSON.parse gives it.
const nearHeader = fc
  .tuple(nearMeta, fc.constantFrom<unknown>('session', 'session', 'session', 'other', undefined), fc.constantFrom<unknown>(0, 1, 1, 2, '1', undefined), fc.boolean())
  .map(([m, type, version, first]) => {
    const fields: Record<string, unknown> = {}
    if (type !== undefined) fields.type = type
    if (version !== undefined) fields.version = version
    // The header fields first (as the package writes them), or after the meta's.
    const text = first ? `{${[JSON.stringify(fields).slice(1, -1), JSON.stringify(m).slice(1, -1)].filter(Boolean).join(',')}}` : `{${[JSON.stringify(m).slice(1, -1), JSON.stringify(fields).slice(1, -1)].filter(Boolean).join(',')}}`
    return JSON.parse(text) as unknown
  })

describe('knownValidHeader agrees with ParsedHeaderSchema (property)', () => {
  test('accepted: zod accepts and returns the same header, key order included; refused: zod refuses too (__proto__ keys aside)', () => {
    let accepted = 0
    fc.assert(
      fc.property(nearHeader, (value) => {
        const viaZod = ParsedHeaderSchema.safeParse(value)
        const fast = knownValidHeader(value)
        if (fast) {
          accepted++
          expect(viaZod.success).toBe(true)
          expect(Object.keys(fast)).toEqual(Object.keys(viaZod.data ?? {}))
          expect(fast).toEqual(viaZod.data)
        } else if (!Object.keys(value as object).includes('__proto__')) {
          expect(viaZod.success).toBe(false)
        }
      }),
      { numRuns: 30_000 },
    )
    expect(accepted).toBeGreaterThan(1_000) // not vacuous
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close
})

describe('through the backend', () => {
  test('the header is what the meta was at create, whatever the caller changes later', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    const m = { ...meta('h', { cwd: '/w' }), labels: { team: 'a' } } as SessionMeta & { labels: { team: string } }
    await p.create(m)
    m.labels.team = 'changed'
    await p.append('h', turn(0, 1))
    await p.closeAll()
    const first = (await readFile(p.locate(meta('h', { cwd: '/w' })).path, 'utf8')).split('\n')[0]
    expect(first).toBe('{"type":"session","version":0,"id":"h","cwd":"/w","createdAt":1700000000000,"delegationDepth":0,"labels":{"team":"a"}}')
  })

  test('regression: a meta whose header line (version 1, checksum and newline included) would pass MAX_HEADER_BYTES is E_INVALID_META at create and fork, naming its size; one at the limit is read back everywhere', async () => {
    // The largest meta whose header line fits: `big` grows the line byte for byte.
    const sized = (id: string, n: number) => ({ ...meta(id), big: 'x'.repeat(n) }) as SessionMeta
    const n = MAX_HEADER_BYTES - Buffer.byteLength(headerLine(sized('b', 0), 1))
    expect(Buffer.byteLength(headerLine(sized('b', n), 1))).toBe(MAX_HEADER_BYTES)
    for (const formatVersion of [0, 1] as const) {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, formatVersion })
      const events = turn(0, 1)
      await p.create(sized('b', n))
      await p.append('b', events)
      await p.close('b')
      const problems: unknown[] = []
      expect((await p.list({ onProblem: (x) => problems.push(x) })).map((l) => l.meta.id)).toEqual(['b'])
      expect(problems).toEqual([])
      expect((await p.read('b')).events).toEqual(events)
      expect((await p.load('b', { from: 'last-compaction' })).meta).toEqual(sized('b', n))
      const over = await rejection(p.create(sized('c', n + 1)))
      expect(over.code).toBe('E_INVALID_META')
      expect(over.message).toContain(`${MAX_HEADER_BYTES + 1} bytes`)
      expect(over.message).toContain(`${MAX_HEADER_BYTES} bytes`)
      expect(await codeOf(p.fork('b', { id: 'f', seedLength: 0, cwd: `/${'d'.repeat(MAX_HEADER_BYTES)}` }))).toBe('E_INVALID_META')
      expect(await codeOf(p.inspect('c'))).toBe('E_NOT_FOUND')
      expect(await codeOf(p.inspect('f'))).toBe('E_NOT_FOUND')
      await p.closeAll()
    }
    const memory = createMemoryPersistence()
    expect(await codeOf(memory.create(sized('c', n + 1)))).toBe('E_INVALID_META')
    await memory.create(sized('b', n))
    await memory.append('b', turn(0, 1))
    expect(await codeOf(memory.fork('b', { id: 'f', seedLength: 0, cwd: `/${'d'.repeat(MAX_HEADER_BYTES)}` }))).toBe('E_INVALID_META')
  })

  test.each([
    ['id empty', { id: '', createdAt: 1, delegationDepth: 0 }, 'E_INVALID_ID'],
    ['createdAt past 2^53', { id: 'b', createdAt: 2 ** 53, delegationDepth: 0 }, 'E_INVALID_META'],
    ['cwd null', { id: 'b', createdAt: 1, delegationDepth: 0, cwd: null }, 'E_INVALID_META'],
    ['parentSession empty', { id: 'b', createdAt: 1, delegationDepth: 0, parentSession: '' }, 'E_INVALID_META'],
    ['seedLength without parentSession', { id: 'b', createdAt: 1, delegationDepth: 0, seedLength: 0 }, 'E_INVALID_META'],
    ['type present', { id: 'b', createdAt: 1, delegationDepth: 0, type: undefined, version: 0 }, 'E_INVALID_META'],
    ['an extra that is not JSON', { id: 'b', createdAt: 1, delegationDepth: 0, when: new Date(0) }, 'E_INVALID_META'],
    ['delegationDepth missing', { id: 'b', createdAt: 1 }, 'E_INVALID_META'],
  ])('%s: %s', async (_label, bad, code) => {
    const p = createJsonlPersistence({ root: await tmpRoot() })
    expect(await codeOf(p.create(bad as unknown as SessionMeta))).toBe(code)
    await p.closeAll()
  })
})
