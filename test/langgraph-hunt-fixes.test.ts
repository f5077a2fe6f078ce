// Defects a hunt found in the LangGraph saver, each pinned: a value the serializer turns into
// nothing (a function), an idleMs beyond setTimeout's limit, deleteThread on a session that is
// not the thread's log, and the call right after a thread failed to open.
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint'
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence, isSessionPersistenceError } from '../src/index.js'
import { checkpoint, codeOf, freshRoots, meta, thread, turn } from './helpers/langgraph-checkpoints.js'

const root = freshRoots()

describe('a value the serializer turns into nothing (a function)', () => {
  it('serializes to empty JSON (the premise)', async () => {
    const [type, bytes] = await new JsonPlusSerializer().dumpsTyped(() => 1)
    expect([type, bytes.byteLength]).toEqual(['json', 0])
  })

  it('as a channel value is stored as no value: the channel reads as absent, the others as written', async () => {
    const r = await root()
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const cp = checkpoint({ a: 'ok', cb: () => 1 }, { a: 1, cb: 1 })
    await saver.put(thread('F'), cp, meta(0), { a: 1, cb: 1 })
    // A fresh saver reads the log, not an index.
    const reader = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const tuple = await reader.getTuple(thread('F'))
    expect(tuple?.checkpoint.channel_values).toEqual({ a: 'ok' })
    expect(tuple?.checkpoint.channel_versions).toEqual({ a: 1, cb: 1 })
    const listed = []
    for await (const t of reader.list(thread('F'))) listed.push(t.checkpoint.channel_values)
    expect(listed).toEqual([{ a: 'ok' }])
  })

  it('as a write is refused with E_NOT_JSON and nothing is appended; the thread reads on', async () => {
    const r = await root()
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const cfg = await saver.put(thread('W'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    expect(await codeOf(saver.putWrites(cfg, [['a', () => 1]], 'task'))).toBe('E_NOT_JSON')
    expect(await codeOf(saver.putWrites(cfg, [['a', Symbol('x')]], 'task'))).toBe('E_NOT_JSON')
    const before = (await createJsonlPersistence({ root: r }).inspect('langgraph:W')).events.length
    await saver.putWrites(cfg, [['a', 2]], 'task')
    const reader = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    expect((await reader.getTuple(thread('W')))?.pendingWrites).toEqual([['task', 'a', 2]])
    // The refused writes appended nothing: only the last call's turn (start, writes, end) follows.
    expect((await createJsonlPersistence({ root: r }).inspect('langgraph:W')).events.length).toBe(before + 3)
  })

  it('stored anyway (empty JSON in the log) makes reads reject with E_CORRUPT naming the thread, never a raw SyntaxError', async () => {
    const r = await root()
    const p = createJsonlPersistence({ root: r })
    await p.create({ id: 'langgraph:E', createdAt: Date.now(), delegationDepth: 0, langgraphThreadId: 'E' })
    const core = { v: 4, id: 'c1', ts: '', channel_versions: { cb: 1 }, versions_seen: {} }
    const value = { channel: 'cb', version: 1, value: { type: 'json', text: '' } }
    await p.append('langgraph:E', turn(0, [{ type: 'langgraph/checkpoint', data: { ns: '', id: 'c1', checkpoint: core, metadata: {}, values: [value] } }]))
    await p.close('langgraph:E')
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    for (const read of [() => saver.getTuple(thread('E')), async () => { for await (const _ of saver.list(thread('E'))) void _ }]) {
      const err = await read().then(() => undefined, (e: unknown) => e)
      expect(isSessionPersistenceError(err, 'E_CORRUPT')).toBe(true)
      expect((err as Error).message).toContain('"E"')
    }
  })
})

describe('idleMs beyond setTimeout (2^31-1 ms)', () => {
  it('is refused with E_CONFIG, as the Claude store refuses idleCloseMs; the limit itself and Infinity are taken', async () => {
    const persistence = createJsonlPersistence({ root: await root() })
    const make = (idleMs: number) => () => new SessionCheckpointSaver({ persistence, idleMs })
    expect(make(2 ** 31)).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
    expect(make(40 * 24 * 3600 * 1000)).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
    expect(make(2 ** 31 - 1)).not.toThrow()
    expect(make(Infinity)).not.toThrow()
  })
})

describe('deleteThread of a session that is not the thread\'s log', () => {
  it('is refused with E_EXISTS, as reads refuse it, and deletes nothing; an absent thread stays a no-op', async () => {
    const r = await root()
    const p = createJsonlPersistence({ root: r })
    // An ordinary session at thread Z's id, and one whose header names another thread.
    await p.create({ id: 'langgraph:Z', createdAt: Date.now(), delegationDepth: 0 })
    await p.append('langgraph:Z', turn(0, [{ type: 'message/user', data: { text: 'hello' } }]))
    await p.close('langgraph:Z')
    await p.create({ id: 'langgraph:Y', createdAt: Date.now(), delegationDepth: 0, langgraphThreadId: 'other' })
    await p.append('langgraph:Y', turn(0, []))
    await p.close('langgraph:Y')
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    for (const id of ['Z', 'Y']) {
      expect(await codeOf(saver.getTuple(thread(id)))).toBe('E_EXISTS')
      expect(await codeOf(saver.deleteThread(id))).toBe('E_EXISTS')
      // Still there, readable.
      expect((await createJsonlPersistence({ root: r }).inspect(`langgraph:${id}`)).meta.id).toBe(`langgraph:${id}`)
    }
    await expect(saver.deleteThread('nobody')).resolves.toBeUndefined()
    // The thread's own log is still deleted.
    await saver.put(thread('mine'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    await saver.deleteThread('mine')
    expect(await codeOf(createJsonlPersistence({ root: r }).inspect('langgraph:mine'))).toBe('E_NOT_FOUND')
  })
})

describe('the call right after a thread failed to open', () => {
  it.each([
    ['E_CORRUPT', { langgraphThreadId: 'K' }, [{ type: 'langgraph/checkpoint', data: { ns: '', id: 'c1', checkpoint: {}, metadata: {}, values: 'not-an-array' } }]],
    ['E_EXISTS', {}, [{ type: 'message/user', data: { text: 'hi' } }]],
  ])('gets the same refusal (%s), not E_SESSION_LIVE: the session was closed before the first rejected', async (code, header, events) => {
    const r = await root()
    const p = createJsonlPersistence({ root: r })
    await p.create({ id: 'langgraph:K', createdAt: Date.now(), delegationDepth: 0, ...header })
    await p.append('langgraph:K', turn(0, events))
    await p.close('langgraph:K')
    const persistence = createJsonlPersistence({ root: r })
    const saver = new SessionCheckpointSaver({ persistence, idleMs: 0 })
    expect(await codeOf(saver.getTuple(thread('K')))).toBe(code)
    expect(await codeOf(saver.put(thread('K'), checkpoint({ a: 1 }), meta(0), { a: 1 }))).toBe(code)
    expect(await codeOf(saver.getTuple(thread('K')))).toBe(code)
    // The backend itself has it closed: deleting it directly works at once.
    await persistence.delete('langgraph:K')
  })
})
