// Thread ids map to session ids injectively (long ones by hash, refused when ill-formed), forks
// that reuse a channel version read their own branch's value, namespaces stay apart, and bad
// inputs fail with a clear code.
import { uuid6 } from '@langchain/langgraph-checkpoint'
import { describe, expect, it, vi } from 'vitest'
import { SessionCheckpointSaver, threadSessionId } from '../src/adapters/langgraph/index.js'
import { SessionPersistenceError } from '../src/errors.js'
import { encodeSessionId, MAX_ENCODED_ID_BYTES } from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { checkpoint, codeOf, meta, thread } from './helpers/langgraph-checkpoints.js'

const newSaver = () => new SessionCheckpointSaver({ persistence: createMemoryPersistence() })

describe('thread ids', () => {
  it('keep short ids readable and give long ones a hashed id that still fits 244 encoded bytes', () => {
    expect(threadSessionId('chat-42')).toBe('langgraph:chat-42')
    const long = 'Ü'.repeat(200)
    const longer = `${long}x`
    const a = threadSessionId(long)
    const b = threadSessionId(longer)
    expect(a).toMatch(/^langgraph#[0-9a-f]{64}$/)
    expect(a).not.toBe(b)
    expect(Buffer.byteLength(encodeSessionId(a))).toBeLessThanOrEqual(MAX_ENCODED_ID_BYTES)
    // Exactly at the limit: still the readable form.
    const edge = 'a'.repeat(MAX_ENCODED_ID_BYTES - encodeSessionId('langgraph:').length)
    expect(threadSessionId(edge)).toBe(`langgraph:${edge}`)
    expect(threadSessionId(`${edge}a`)).toMatch(/^langgraph#/)
  })

  it('work end to end for a 10,000-character thread id, which comes back as given', async () => {
    const saver = newSaver()
    const id = `user/${'é'.repeat(10_000)}`
    const c = checkpoint({ a: 1 })
    await saver.put(thread(id), c, meta(0), { a: 1 })
    const tuple = await saver.getTuple(thread(id))
    expect(tuple?.checkpoint).toEqual(c)
    expect(tuple?.config.configurable?.thread_id).toBe(id)
    const all = []
    for await (const t of saver.list({})) all.push(t.config.configurable?.thread_id)
    expect(all).toEqual([id])
  })

  it('refuse a thread id with a lone surrogate (E_INVALID_ID)', async () => {
    expect(await codeOf(newSaver().put(thread('bad\uD800'), checkpoint(), meta(0), {}))).toBe('E_INVALID_ID')
  })
})

describe('forks and namespaces', () => {
  it('a fork that reuses a channel version reads its own value, and the old branch keeps its own', async () => {
    const saver = newSaver()
    const root = checkpoint({ x: 'root' }, { x: 1 })
    const rootCfg = await saver.put(thread('f'), root, meta(0), { x: 1 })
    const a = checkpoint({ x: 'branch A' }, { x: 2 })
    await saver.put(rootCfg, a, meta(1), { x: 2 })
    // Time travel: a new child of the root, whose version 2 of `x` holds another value.
    const b = checkpoint({ x: 'branch B' }, { x: 2 })
    const bCfg = await saver.put(rootCfg, b, meta(1, 'fork'), { x: 2 })
    expect((await saver.getTuple(thread('f', a.id)))?.checkpoint.channel_values).toEqual({ x: 'branch A' })
    expect((await saver.getTuple(bCfg))?.checkpoint.channel_values).toEqual({ x: 'branch B' })
    expect((await saver.getTuple(bCfg))?.parentConfig?.configurable?.checkpoint_id).toBe(root.id)
    // A checkpoint below B that changes nothing carries B's value over.
    const c = checkpoint({ x: 'branch B' }, { x: 2 })
    await saver.put(bCfg, c, meta(2), {})
    expect((await saver.getTuple(thread('f')))?.checkpoint.channel_values).toEqual({ x: 'branch B' })
    const sources = []
    for await (const t of saver.list(thread('f'), { filter: { source: 'fork' } })) sources.push(t.checkpoint.id)
    expect(sources).toEqual([b.id])
  })

  it('namespaces of one thread are apart: latest, list and values per namespace', async () => {
    const saver = newSaver()
    const parent = checkpoint({ v: 'root ns' }, { v: 1 })
    await saver.put(thread('ns'), parent, meta(0), { v: 1 })
    const child = checkpoint({ v: 'sub ns' }, { v: 1 })
    await saver.put(thread('ns', undefined, 'tools:abc'), child, meta(0), { v: 1 })
    expect((await saver.getTuple(thread('ns')))?.checkpoint).toEqual(parent)
    expect((await saver.getTuple(thread('ns', undefined, 'tools:abc')))?.checkpoint).toEqual(child)
    const ids = async (config: object) => {
      const out = []
      for await (const t of saver.list(config)) out.push(t.checkpoint.id)
      return out
    }
    expect(await ids(thread('ns', undefined, 'tools:abc'))).toEqual([child.id])
    expect(await ids({ configurable: { thread_id: 'ns' } })).toEqual([child.id, parent.id].sort().reverse())
  })
})

describe('bad inputs', () => {
  it('put without a thread_id, or without configurable, is E_CONFIG', async () => {
    const saver = newSaver()
    expect(await codeOf(saver.put({ configurable: {} }, checkpoint(), meta(0), {}))).toBe('E_CONFIG')
    expect(await codeOf(saver.put({}, checkpoint(), meta(0), {}))).toBe('E_CONFIG')
    expect(await codeOf(saver.put({ configurable: { thread_id: 42 } }, checkpoint(), meta(0), {}))).toBe('E_CONFIG')
    expect(await codeOf(saver.put({ configurable: { thread_id: '' } }, checkpoint(), meta(0), {}))).toBe('E_CONFIG')
  })

  it('putWrites without a checkpoint_id (writes need their checkpoint) or a task id is E_CONFIG', async () => {
    const saver = newSaver()
    expect(await codeOf(saver.putWrites(thread('t'), [['a', 1]], 'task'))).toBe('E_CONFIG')
    expect(await codeOf(saver.putWrites({ configurable: { checkpoint_id: uuid6(-1) } }, [['a', 1]], 'task'))).toBe('E_CONFIG')
    expect(await codeOf(saver.putWrites(thread('t', uuid6(-1)), [['a', 1]], ''))).toBe('E_CONFIG')
    expect(await codeOf(saver.putWrites(thread('t', uuid6(-1)), [['a', 1] as never, 'oops' as never], 'task'))).toBe('E_INVALID_EVENT')
  })

  it('metadata or a value that cannot be serialized is E_NOT_JSON, and nothing is stored', async () => {
    const saver = newSaver()
    expect(await codeOf(saver.put(thread('j'), checkpoint(), meta(0, 'loop', { big: 10n }), {}))).toBe('E_NOT_JSON')
    expect(await codeOf(saver.put(thread('j'), checkpoint({ a: 1n }), meta(0), { a: 1 }))).toBe('E_NOT_JSON')
    expect(await codeOf(saver.put(thread('j'), checkpoint(), null as never, {}))).toBe('E_INVALID_EVENT')
    expect(await codeOf(saver.put(thread('j'), { ...checkpoint(), id: '' }, meta(0), {}))).toBe('E_INVALID_EVENT')
    expect(await saver.getTuple(thread('j'))).toBeUndefined()
  })

  it('a call that cannot be serialized fails alone; the calls beside it are stored', async () => {
    const saver = newSaver()
    const good = checkpoint({ a: 1 })
    const [bad, ok] = await Promise.allSettled([
      saver.put(thread('mixed'), checkpoint(), meta(0, 'loop', { big: 1n }), {}),
      saver.put(thread('mixed'), good, meta(1), { a: 1 }),
    ])
    expect(bad.status === 'rejected' && (bad.reason as { code?: string }).code).toBe('E_NOT_JSON')
    expect(ok.status).toBe('fulfilled')
    expect((await saver.getTuple(thread('mixed')))?.checkpoint).toEqual(good)
  })

  it('a failed append rejects every call it carried and leaves nothing of them; the next call reloads the log', async () => {
    const persistence = createMemoryPersistence()
    const saver = new SessionCheckpointSaver({ persistence })
    const first = checkpoint({ a: 1 })
    const cfg = await saver.put(thread('fail'), first, meta(0), { a: 1 })
    const load = vi.spyOn(persistence, 'load')
    vi.spyOn(persistence, 'append').mockRejectedValueOnce(new SessionPersistenceError('E_IO', 'disk full'))
    const results = await Promise.allSettled([
      saver.put(cfg, checkpoint({ a: 2 }, { a: 2 }), meta(1), { a: 2 }),
      saver.putWrites(cfg, [['a', 3]], 'task'),
    ])
    expect(results.map((r) => r.status === 'rejected' && (r.reason as { code?: string }).code)).toEqual(['E_IO', 'E_IO'])
    const latest = await saver.getTuple(thread('fail'))
    expect(latest?.checkpoint).toEqual(first)
    expect(latest?.pendingWrites).toEqual([])
    expect(load).toHaveBeenCalledTimes(1)
    await saver.putWrites(cfg, [['a', 3]], 'task')
    expect((await saver.getTuple(cfg))?.pendingWrites).toEqual([['task', 'a', 3]])
  })

  it('getTuple without a thread is undefined; a thread or checkpoint never stored too', async () => {
    const saver = newSaver()
    expect(await saver.getTuple({})).toBeUndefined()
    expect(await saver.getTuple({ configurable: { checkpoint_ns: '' } })).toBeUndefined()
    expect(await saver.getTuple(thread('nobody'))).toBeUndefined()
    await saver.put(thread('some'), checkpoint(), meta(0), {})
    expect(await saver.getTuple(thread('some', uuid6(-1)))).toBeUndefined()
    expect(await codeOf(saver.getTuple({ configurable: { thread_id: 7 } }))).toBe('E_CONFIG')
  })

  it('list with a limit that is not an integer or a filter that is not an object is E_CONFIG', async () => {
    const saver = newSaver()
    const drain = async (it: AsyncGenerator<unknown>) => {
      for await (const _ of it) void _
    }
    expect(await codeOf(drain(saver.list(thread('x'), { limit: 1.5 })))).toBe('E_CONFIG')
    expect(await codeOf(drain(saver.list(thread('x'), { filter: 'source' as never })))).toBe('E_CONFIG')
  })

  it('a saver without a persistence, or with a bad idleMs, is E_CONFIG', () => {
    expect(() => new SessionCheckpointSaver({} as never)).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
    expect(() => new SessionCheckpointSaver({ persistence: createMemoryPersistence(), idleMs: -1 })).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
  })
})
