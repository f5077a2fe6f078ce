// The saver's error paths, each pinned by a hunt: what a public method does with bad input or a
// damaged log is a SessionPersistenceError with a stable code (or what LangGraph's MemorySaver
// does), never a raw serializer error or a TypeError.
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence, isSessionPersistenceError } from '../src/index.js'
import type { ListProblem } from '../src/persistence.js'
import { checkpoint, codeOf, freshRoots, meta, thread, turn } from './helpers/langgraph-checkpoints.js'

const root = freshRoots()

/** `thread:checkpoint` of what `list()` across threads yields, with `limit` when given. */
async function listedAcross(saver: SessionCheckpointSaver, limit?: number): Promise<string[]> {
  const out: string[] = []
  for await (const t of saver.list({}, limit === undefined ? undefined : { limit })) out.push(`${t.config.configurable?.thread_id}:${t.checkpoint.id}`)
  return out
}

/** Empty JSON text: what earlier builds stored for a function, which the serializer cannot read back. */
const UNREADABLE = { type: 'json', text: '' }

const core = (id: string, versions: Record<string, number>) => ({ v: 4, id, ts: '', channel_versions: versions, versions_seen: {} })

/** Writes a thread's log by hand: a header naming the thread, then one turn of `events`. */
async function handWritten(r: string, threadId: string, events: { type: string; data: unknown }[]): Promise<void> {
  const p = createJsonlPersistence({ root: r })
  const id = `langgraph:${threadId}`
  await p.create({ id, createdAt: Date.now(), delegationDepth: 0, langgraphThreadId: threadId })
  await p.append(id, turn(0, events))
  await p.close(id)
}

/** A thread 'D' whose log has c1 (storing `a` unreadable) <- c2, with an unreadable write of `b` against c1. */
async function damagedThread(r: string): Promise<void> {
  await handWritten(r, 'D', [
    { type: 'langgraph/checkpoint', data: { ns: '', id: 'c1', checkpoint: core('c1', { a: 1 }), metadata: {}, values: [{ channel: 'a', version: 1, value: UNREADABLE }] } },
    { type: 'langgraph/writes', data: { ns: '', checkpoint: 'c1', task: 't1', writes: [{ idx: 0, channel: 'b', value: UNREADABLE }] } },
    { type: 'langgraph/checkpoint', data: { ns: '', id: 'c2', parent: 'c1', checkpoint: core('c2', {}), metadata: {}, values: [] } },
  ])
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => 'resolved',
    (e: unknown) => e,
  )
}

describe('getDeltaChannelHistory over a stored value the serializer cannot read back', () => {
  it.each([
    ['a seed', ['a']],
    ['a write', ['b']],
  ])('(%s) rejects with E_CORRUPT naming the thread, as getTuple and list do, never the raw serializer error', async (_what, channels) => {
    const r = await root()
    await damagedThread(r)
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const err = await rejection(saver.getDeltaChannelHistory({ config: thread('D', 'c2'), channels }))
    expect(isSessionPersistenceError(err, 'E_CORRUPT')).toBe(true)
    expect((err as Error).message).toContain('"D"')
    expect((err as { sessionId?: string }).sessionId).toBe('langgraph:D')
    await saver.close()
  })
})

describe('getDeltaChannelHistory given options that are not { config, channels: string[] }', () => {
  it('rejects with E_CONFIG, never a TypeError', async () => {
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: await root() }), idleMs: 0 })
    const call = (options: unknown) => saver.getDeltaChannelHistory(options as never)
    for (const options of [undefined, null, 'x', {}, { config: thread('T') }, { config: thread('T'), channels: null }, { config: thread('T'), channels: 'a' }]) {
      expect(await codeOf(() => call(options))).toBe('E_CONFIG')
    }
    // What MemorySaver (the base class's walk) answers for the rest: nothing for an empty list, an empty history per channel of a thread never stored.
    expect(await call({ config: thread('T'), channels: [] })).toEqual({})
    expect(await call({ config: thread('T'), channels: ['a'] })).toEqual({ a: { writes: [] } })
    await saver.close()
  })
})

describe('a stored checkpoint that the serializer reads back as something other than an object', () => {
  // The serializer revives {lc: 2, type: 'undefined'} as undefined: no put stores a checkpoint like it, damage does.
  it('makes getTuple and list reject with E_CORRUPT naming the thread, never a TypeError', async () => {
    const r = await root()
    await handWritten(r, 'U', [{ type: 'langgraph/checkpoint', data: { ns: '', id: 'c1', checkpoint: { lc: 2, type: 'undefined' }, metadata: {}, values: [] } }])
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    for (const read of [() => saver.getTuple(thread('U')), () => saver.getTuple(thread('U', 'c1')), async () => { for await (const _ of saver.list(thread('U'))) void _ }]) {
      const err = await rejection(read())
      expect(isSessionPersistenceError(err, 'E_CORRUPT')).toBe(true)
      expect((err as Error).message).toContain('"U"')
    }
    await saver.close()
  })
})

describe('list() across threads when one thread holds a stored value the serializer cannot read back', () => {
  it('leaves that checkpoint out and reports it (E_CORRUPT), listing the others up to the limit; the thread itself still rejects', async () => {
    const r = await root()
    const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const good = await writer.put(thread('good'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    await writer.close()
    // Its checkpoints 'c1' and 'c2' sort after any uuid6 id: they come first, newest first.
    await damagedThread(r)
    const problems: ListProblem[] = []
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0, onProblem: (p) => problems.push(p) })
    const listed = (limit?: number) => listedAcross(saver, limit)
    // c2 stores nothing unreadable and has no writes of its own: it is listed; c1 is not.
    expect(await listed()).toEqual(['D:c2', `good:${good.configurable?.checkpoint_id}`])
    expect(problems.map((p) => [p.code, p.path])).toEqual([['E_CORRUPT', 'langgraph:D']])
    expect(problems[0]!.message).toContain('"D"')
    expect(problems[0]!.message).toContain('c1')
    problems.length = 0
    // The limit counts what is listed: the one left out does not take a place.
    expect(await listed(2)).toEqual(['D:c2', `good:${good.configurable?.checkpoint_id}`])
    expect(problems.map((p) => p.code)).toEqual(['E_CORRUPT'])
    expect(await codeOf(async () => { for await (const _ of saver.list(thread('D'))) void _ })).toBe('E_CORRUPT')
    await saver.close()
  })

  it('lists an older checkpoint in the place of a newest one left out under a limit', async () => {
    const r = await root()
    // E's newest checkpoint holds the unreadable value, its older one none.
    await handWritten(r, 'E', [
      { type: 'langgraph/checkpoint', data: { ns: '', id: 'c1', checkpoint: core('c1', {}), metadata: {}, values: [] } },
      { type: 'langgraph/checkpoint', data: { ns: '', id: 'c2', parent: 'c1', checkpoint: core('c2', { a: 1 }), metadata: {}, values: [{ channel: 'a', version: 1, value: UNREADABLE }] } },
    ])
    const problems: ListProblem[] = []
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0, onProblem: (p) => problems.push(p) })
    const listed = (limit?: number) => listedAcross(saver, limit)
    expect([await listed(1), problems.map((p) => p.code)]).toEqual([['E:c1'], ['E_CORRUPT']])
    expect(await listed()).toEqual(['E:c1'])
    await saver.close()
  })
})

describe('put of a checkpoint that cannot be copied (a cycle in versions_seen)', () => {
  it('rejects with E_NOT_JSON, never a RangeError, and stores nothing', async () => {
    const r = await root()
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    expect(await codeOf(saver.put(thread('V'), { ...checkpoint({ a: 1 }), versions_seen: cyclic as never }, meta(0), { a: 1 }))).toBe('E_NOT_JSON')
    expect(await saver.getTuple(thread('V'))).toBeUndefined()
    await saver.close()
  })
})

describe('list() across threads (no thread_id)', () => {
  it('keeps to the checkpoint_id the config names, as MemorySaver does', async () => {
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: await root() }), idleMs: 0 })
    const a = checkpoint({ a: 1 })
    const b = checkpoint({ a: 2 })
    await saver.put(thread('A'), a, meta(0), { a: 1 })
    await saver.put(thread('B'), b, meta(0), { a: 1 })
    const threadsOf = async (config: object) => {
      const out: unknown[] = []
      for await (const t of saver.list(config)) out.push(t.config.configurable?.thread_id)
      return out
    }
    expect(await threadsOf({ configurable: { checkpoint_id: a.id } })).toEqual(['A'])
    expect(await threadsOf({ configurable: { checkpoint_ns: '', checkpoint_id: b.id } })).toEqual(['B'])
    expect(await threadsOf({ configurable: { checkpoint_id: 'none' } })).toEqual([])
    expect(await threadsOf({ configurable: {} })).toEqual(['B', 'A'])
    expect(await codeOf(() => threadsOf({ configurable: { checkpoint_id: 5 } }))).toBe('E_CONFIG')
    await saver.close()
  })

  it('leaves out and reports (E_EXISTS) a thread whose session is not its log, which a session elsewhere names', async () => {
    const r = await root()
    const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const good = await writer.put(thread('good'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    await writer.close()
    const p = createJsonlPersistence({ root: r })
    // A copy of thread X's log kept under another id (its header names X), and a session at X's id that is not X's.
    await p.create({ id: 'backup', createdAt: Date.now(), delegationDepth: 0, langgraphThreadId: 'X' })
    await p.append('backup', turn(0, []))
    await p.create({ id: 'langgraph:X', createdAt: Date.now(), delegationDepth: 0 })
    await p.append('langgraph:X', turn(0, []))
    await Promise.all([p.close('backup'), p.close('langgraph:X')])
    const problems: ListProblem[] = []
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0, onProblem: (x) => problems.push(x) })
    const listed: string[] = []
    for await (const t of saver.list({})) listed.push(`${t.config.configurable?.thread_id}:${t.checkpoint.id}`)
    expect(listed).toEqual([`good:${good.configurable?.checkpoint_id}`])
    expect(problems.map((x) => [x.code, x.path])).toEqual([['E_EXISTS', 'langgraph:X']])
    expect(await codeOf(saver.getTuple(thread('X')))).toBe('E_EXISTS')
    await saver.close()
  })
})

describe('a put or putWrites refused for what it holds', () => {
  it("names the thread's session in the error's sessionId (not the bare thread id)", async () => {
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: await root() }), idleMs: 0 })
    const cfg = await saver.put(thread('S'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    for (const call of [
      () => saver.put(thread('S'), checkpoint({ a: 1n }), meta(1), { a: 2 }),
      () => saver.put(thread('S'), checkpoint({ a: 1 }), { ...meta(1), big: 1n } as never, { a: 2 }),
      () => saver.put(thread('S'), { ...checkpoint({ a: 1 }), versions_seen: cyclic as never }, meta(1), { a: 2 }),
      () => saver.putWrites(cfg, [['a', () => 1]], 'task'),
    ]) {
      const err = await rejection(call())
      expect(isSessionPersistenceError(err, 'E_NOT_JSON')).toBe(true)
      expect((err as { sessionId?: string }).sessionId).toBe('langgraph:S')
    }
    await saver.close()
  })
})
