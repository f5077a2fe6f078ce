// Values the adapters walk before the backend sees them (the AI SDK's toJson, the plain-JSON check
// of src/session/json-check.ts): a cycle, or nesting deeper than the call stack, is E_NOT_JSON like
// any other value the log cannot hold, never a RangeError (a hunt's finds). A turn whose end
// reason is refused ends as an error and the session still closes, releasing its lock; refused
// input starts no turn and writes nothing; what the core append accepts, the adapters accept.
import { describe, expect, it } from 'vitest'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { toJson } from '../src/adapters/ai-sdk/json.js'
import { JsonlSession } from '../src/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { plainJsonProblem } from '../src/session/json-check.js'
import { rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

const DEEP = 20_000

/** `{ x: { x: … { x: leaf } } }`, `levels` objects deep. */
function nested(levels: number, leaf: unknown = {}): Record<string, unknown> {
  let value: unknown = leaf
  for (let i = 0; i < levels; i++) value = { x: value }
  return value as Record<string, unknown>
}

function cyclic(): Record<string, unknown> {
  const value: Record<string, unknown> = { kind: 'error' }
  value.self = value
  return value
}

describe('the AI SDK turn and an end reason the log cannot hold', () => {
  for (const [name, reason, message] of [
    ['a cycle', cyclic(), /data\.reason\.self is a circular reference/],
    ['nesting 20,000 deep', { kind: 'error', deep: nested(DEEP) }, /nested too deeply/],
  ] as const) {
    it(`${name}: end() rejects E_NOT_JSON, the turn ends as an error, and close() releases the lock`, async () => {
      const root = await tmpRoot()
      const session = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'reason' })
      const turn = session.turn('hello')
      const refused = await rejection(Promise.resolve().then(() => turn.end(reason as never)))
      const done = await rejection(turn.done) // settles: the turn's end is durable
      expect(refused.code).toBe('E_NOT_JSON')
      expect(refused.message).toMatch(message)
      expect(done).toBe(refused)
      expect(turn.ended).toBe(true)
      expect(session.currentTurn).toBeUndefined()

      // The session goes on: the next turn starts and ends.
      const next = session.turn('next')
      expect(next.number).toBe(2)
      await next.end({ kind: 'completed' })
      await session.close()

      // Its lock is released: another instance opens it, and reads the first turn ended as an error.
      const again = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'reason' })
      expect(again.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end', 'turn/start', 'user/message', 'turn/end'])
      expect(again.events[2]!.data).toEqual({ turn: 1, reason: { kind: 'error', code: 'E_NOT_JSON', message: refused.message } })
      await again.close()
    }, 30_000)
  }
})

describe('the AI SDK turn and an end reason that cannot be read', () => {
  it('end() rejects with the getter\'s error and changes nothing: the turn stays open, and close() ends it aborted', async () => {
    const root = await tmpRoot()
    const session = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'getter' })
    const turn = session.turn('hello')
    const reason = {
      kind: 'error',
      get detail(): string {
        throw new Error('unreadable')
      },
    }
    const refused = await rejection(Promise.resolve().then(() => turn.end(reason as never)))
    expect(refused.message).toBe('unreadable')
    expect(turn.ended).toBe(false)
    expect(session.currentTurn).toBe(turn)
    await session.close() // ends the turn still open as aborted, and releases the lock
    await turn.done
    const again = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'getter' })
    expect(again.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
    expect(again.events[2]!.data).toEqual({ turn: 1, reason: { kind: 'aborted' } })
    await again.close()
  }, 30_000)
})

describe('the AI SDK turn() and input the log cannot hold', () => {
  const part = { type: 'text', text: 'hi' } as Record<string, unknown>
  part.providerOptions = { app: { self: part } }
  for (const [name, input, message] of [
    ['a cycle', { role: 'user', content: [part] }, /circular reference/],
    ['nesting 20,000 deep', { role: 'user', content: [{ type: 'text', text: 'hi', providerOptions: { app: nested(DEEP) } }] }, /nested too deeply/],
  ] as const) {
    it(`${name}: turn() throws E_NOT_JSON, no turn starts, nothing is written`, async () => {
      const persistence = createMemoryPersistence()
      const session = await openAiSdkSession({ persistence, sessionId: 'input' })
      let thrown: unknown
      try {
        session.turn(input as never)
      } catch (error) {
        thrown = error
      }
      expect((thrown as { code?: unknown }).code).toBe('E_NOT_JSON')
      expect((thrown as Error).message).toMatch(message)
      expect(session.currentTurn).toBeUndefined()
      expect(session.events).toEqual([])
      const turn = session.turn('hi')
      expect(turn.number).toBe(1)
      await turn.end({ kind: 'completed' })
      await session.close()
      expect((await persistence.load('input')).events.map((e) => [e.seq, e.type])).toEqual([
        [0, 'turn/start'],
        [1, 'user/message'],
        [2, 'turn/end'],
      ])
    }, 30_000)
  }
})

describe('the AI SDK compact() and a summary the log cannot hold', () => {
  it('a summary nested 20,000 deep is E_NOT_JSON, nothing written, and the session goes on', async () => {
    const persistence = createMemoryPersistence()
    const session = await openAiSdkSession({ persistence, sessionId: 'summary' })
    await session.turn('hi').end({ kind: 'completed' })
    const refused = await rejection(session.compact({ summary: [{ type: 'text', text: 's', providerOptions: nested(DEEP) }] }))
    expect(refused.code).toBe('E_NOT_JSON')
    expect(refused.message).toMatch(/^compact: summary is nested too deeply/)
    await session.compact({ summary: 'so far' })
    await session.close()
    expect((await persistence.load('summary')).events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end', 'history/compact'])
  }, 30_000)
})

describe('the OpenAI Agents session and items the log cannot hold', () => {
  const loop = { type: 'message', role: 'user', content: 'c', providerData: {} as Record<string, unknown> }
  loop.providerData.self = loop
  for (const [name, item, message] of [
    ['a cycle', loop, /^addItems: items\[0\]\.providerData\.self is a circular reference$/],
    ['nesting 20,000 deep', { type: 'message', role: 'user', content: 'd', providerData: nested(DEEP) }, /^addItems: items\[0\] is nested too deeply/],
  ] as const) {
    it(`${name}: addItems rejects E_NOT_JSON and writes nothing`, async () => {
      const persistence = createMemoryPersistence()
      const session = new JsonlSession({ persistence, sessionId: 'items' })
      await session.addItems([{ type: 'message', role: 'user', content: 'first' }])
      const refused = await rejection(session.addItems([item as never]))
      expect(refused.code).toBe('E_NOT_JSON')
      expect(refused.message).toMatch(message)
      expect(await session.getItems()).toEqual([{ type: 'message', role: 'user', content: 'first' }])
      await session.close()
      expect((await persistence.load('items')).events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
    }, 30_000)
  }

  it('compact() of a summary nested 20,000 deep is E_NOT_JSON, nothing written', async () => {
    const persistence = createMemoryPersistence()
    const session = new JsonlSession({ persistence, sessionId: 'summary' })
    await session.addItems([{ type: 'message', role: 'user', content: 'first' }])
    const refused = await rejection(session.compact({ summary: [{ type: 'input_text', text: 's', providerData: nested(DEEP) }] as never }))
    expect(refused.code).toBe('E_NOT_JSON')
    expect(refused.message).toMatch(/^compact: summary is nested too deeply/)
    await session.close()
    expect((await persistence.load('summary')).events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
  }, 30_000)

  it('accepts an item as deep as the core append accepts, and a fresh instance reads it back', async () => {
    const persistence = createMemoryPersistence()
    const item = { type: 'message', role: 'user', content: 'd', providerData: nested(2_500) }
    const session = new JsonlSession({ persistence, sessionId: 'deep-ok' })
    await session.addItems([item as never])
    await session.close()
    const fresh = new JsonlSession({ persistence, sessionId: 'deep-ok' })
    expect(await fresh.getItems()).toEqual([item])
    await fresh.close()
  }, 30_000)
})

describe('the walks themselves', () => {
  it('plainJsonProblem walks nesting deeper than the call stack and finds what is wrong at its bottom', () => {
    expect(plainJsonProblem(nested(DEEP), 'data')).toBeUndefined()
    const problem = plainJsonProblem(nested(DEEP, 1n), 'data')
    expect(problem).toBe(`data${'.x'.repeat(DEEP)} is a BigInt`)
    const loop = nested(DEEP)
    let bottom = loop
    while (Object.keys(bottom.x as object).length > 0) bottom = bottom.x as Record<string, unknown>
    bottom.x = loop
    expect(plainJsonProblem(loop, 'data')).toBe(`data${'.x'.repeat(DEEP)} is a circular reference`)
    expect(plainJsonProblem(nested(5), 'meta', [], 3)).toBe('meta.x.x.x is nested more than 3 levels deep')
  })

  it('toJson copies nesting deeper than the call stack, and keeps a cycle where it was (for the backend to name)', () => {
    let copy = toJson(nested(DEEP)) as Record<string, unknown>
    let levels = 0
    while (copy.x !== undefined) {
      copy = copy.x as Record<string, unknown>
      levels++
    }
    expect(levels).toBe(DEEP)
    const original = cyclic()
    const converted = toJson({ reason: original, at: new Date(0) }) as { reason: Record<string, unknown>; at: unknown }
    expect(converted.at).toBe('1970-01-01T00:00:00.000Z')
    expect(converted.reason).not.toBe(original)
    expect(converted.reason.self).toBe(converted.reason)
    expect(plainJsonProblem(converted, 'data')).toBe('data.reason.self is a circular reference')
  })
})
