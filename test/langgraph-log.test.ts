// What the saver writes: one durable append per put and per putWrites (a turn holding one
// langgraph event), lines only ever added, and a restarted saver that answers from one read of
// the log exactly as the one that wrote it.
import { readFile, rm } from 'node:fs/promises'
import { JsonPlusSerializer, uuid6 } from '@langchain/langgraph-checkpoint'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { checkpoint, freshRoot, logEvents, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

async function saverAt(root?: string) {
  const r = root ?? (await freshRoot())
  if (!root) roots.push(r)
  const persistence = createJsonlPersistence({ root: r })
  return { root: r, persistence, saver: new SessionCheckpointSaver({ persistence }) }
}

describe('the log of a thread', () => {
  it('gets one append per put and per putWrites, each a turn around one langgraph event', async () => {
    const { persistence, saver } = await saverAt()
    const append = vi.spyOn(persistence, 'append')
    const c1 = checkpoint({ messages: ['hi'] })
    const cfg1 = await saver.put(thread('t'), c1, meta(-1, 'input'), { messages: 1 })
    await saver.putWrites(cfg1, [['messages', ['hi', 'there']]], 'task-a')
    const c2 = checkpoint({ messages: ['hi', 'there'] }, { messages: 2 })
    await saver.put(cfg1, c2, meta(0), { messages: 2 })
    expect(append).toHaveBeenCalledTimes(3)
    const events = await logEvents(persistence.locate({ id: 'langgraph:t', createdAt: 0, delegationDepth: 0 }).path)
    expect(events.map((e) => e.type)).toEqual([
      'turn/start', 'langgraph/checkpoint', 'turn/end',
      'turn/start', 'langgraph/writes', 'turn/end',
      'turn/start', 'langgraph/checkpoint', 'turn/end',
    ])
    expect(events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    expect(events[8]!.data).toEqual({ turn: 3, reason: { kind: 'completed' } })
    expect(events[7]!.data).toMatchObject({ ns: '', id: c2.id, parent: c1.id, metadata: { source: 'loop', step: 0, parents: {} } })
    expect(events[4]!.data).toMatchObject({ ns: '', checkpoint: c1.id, task: 'task-a', writes: [{ idx: 0, channel: 'messages' }] })
    await saver.close()
  })

  it('only ever grows: every earlier byte stays as it was', async () => {
    const { persistence, saver } = await saverAt()
    const path = persistence.locate({ id: 'langgraph:grow', createdAt: 0, delegationDepth: 0 }).path
    let config = thread('grow')
    let before = Buffer.alloc(0)
    for (let step = 0; step < 6; step++) {
      config = await saver.put(config, checkpoint({ n: step }, { n: step + 1 }), meta(step), { n: step + 1 })
      await saver.putWrites(config, [['n', step + 1]], `task-${step}`)
      const now = await readFile(path)
      expect(now.length).toBeGreaterThan(before.length)
      expect(now.subarray(0, before.length).equals(before)).toBe(true)
      before = now
    }
    await saver.close()
  })

  it('is read once by a restarted saver, which answers getTuple and list as the writer did', async () => {
    const { root, persistence, saver } = await saverAt()
    let config = thread('restart')
    const ids: string[] = []
    for (let step = 0; step < 5; step++) {
      const c = checkpoint({ n: step, fixed: 'x' }, { n: step + 1, fixed: 1 })
      config = await saver.put(config, c, meta(step), step === 0 ? { n: 1, fixed: 1 } : { n: step + 1 })
      await saver.putWrites(config, [['n', step + 10]], 'task')
      ids.push(c.id)
    }
    const written = await saver.getTuple(thread('restart'))
    const listed = []
    for await (const t of saver.list(thread('restart'))) listed.push(t)
    await saver.close()
    await persistence.closeAll()

    const again = await saverAt(root)
    const load = vi.spyOn(again.persistence, 'load')
    const inspect = vi.spyOn(again.persistence, 'inspect')
    expect(await again.saver.getTuple(thread('restart'))).toEqual(written)
    expect(written?.checkpoint.channel_values).toEqual({ n: 4, fixed: 'x' })
    expect(written?.pendingWrites).toEqual([['task', 'n', 14]])
    const relisted = []
    for await (const t of again.saver.list(thread('restart'))) relisted.push(t)
    expect(relisted).toEqual(listed)
    expect(relisted.map((t) => t.checkpoint.id)).toEqual([...ids].reverse())
    expect(await again.saver.getTuple(thread('restart', ids[1]))).toEqual(listed[3])
    expect(load).toHaveBeenCalledTimes(1)
    expect(inspect).not.toHaveBeenCalled()
    await again.saver.close()
  })

  it('keeps writes that arrive before their checkpoint (durability "async" sends them first)', async () => {
    const { saver } = await saverAt()
    const id = uuid6(-1)
    await saver.putWrites(thread('early', id), [['messages', 'early']], 'task-1')
    expect(await saver.getTuple(thread('early'))).toBeUndefined()
    await saver.put(thread('early'), checkpoint({}, {}, id), meta(0), {})
    expect((await saver.getTuple(thread('early')))?.pendingWrites).toEqual([['task-1', 'messages', 'early']])
    await saver.close()
  })

  it('keeps the first copy of a regular write and the last of a special one, appending nothing for a repeat', async () => {
    const { persistence, saver } = await saverAt()
    const cfg = await saver.put(thread('w'), checkpoint(), meta(0), {})
    await saver.putWrites(cfg, [['a', 1], ['b', 2]], 'task')
    const append = vi.spyOn(persistence, 'append')
    await saver.putWrites(cfg, [['a', 'again'], ['b', 'again']], 'task')
    expect(append).not.toHaveBeenCalled()
    await saver.putWrites(cfg, [['__interrupt__', 'first']], 'task')
    await saver.putWrites(cfg, [['__interrupt__', 'second']], 'task')
    await saver.putWrites(cfg, [['__error__', 'boom']], 'other', 'path-b')
    expect(append).toHaveBeenCalledTimes(3)
    expect((await saver.getTuple(cfg))?.pendingWrites).toEqual([
      ['task', '__interrupt__', 'second'],
      ['task', 'a', 1],
      ['task', 'b', 2],
      ['other', '__error__', 'boom'],
    ])
    await saver.close()
  })

  it('appends concurrent calls in call order, even when a later one serializes first', async () => {
    const root = await freshRoot()
    roots.push(root)
    const plain = new JsonPlusSerializer()
    const serde = {
      dumpsTyped: async (v: unknown) => {
        if (v === 'slow') await new Promise((r) => setTimeout(r, 30))
        return plain.dumpsTyped(v)
      },
      loadsTyped: (t: string, d: Uint8Array | string) => plain.loadsTyped(t, d),
    }
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), serde })
    const cfg = await saver.put(thread('order'), checkpoint(), meta(0), {})
    await Promise.all([saver.putWrites(cfg, [['a', 'slow']], 'task'), saver.putWrites(cfg, [['a', 'fast']], 'task')])
    expect((await saver.getTuple(cfg))?.pendingWrites).toEqual([['task', 'a', 'slow']])
    await saver.close()
  })

  it('carries the calls queued behind an append in flight in one append (group commit), in call order', async () => {
    const { persistence, saver } = await saverAt()
    const append = vi.spyOn(persistence, 'append')
    const c1 = checkpoint({ n: 1 })
    const cfg1 = await saver.put(thread('group'), c1, meta(0), { n: 1 })
    append.mockClear()
    // As LangGraph's durability 'async' does: several calls in flight on one thread.
    const c2 = checkpoint({ n: 2 }, { n: 2 })
    const calls = [
      saver.putWrites(cfg1, [['n', 'first']], 'task'),
      saver.putWrites(cfg1, [['n', 'second']], 'task'),
      saver.putWrites(cfg1, [['other', 1]], 'task-2'),
      saver.put(cfg1, c2, meta(1), { n: 2 }),
    ]
    await Promise.all(calls)
    expect(append.mock.calls.length).toBeLessThan(calls.length)
    const events = await logEvents(persistence.locate({ id: 'langgraph:group', createdAt: 0, delegationDepth: 0 }).path)
    const kinds = events.slice(3).map((e) => e.type)
    // Every append is still one turn; the langgraph events keep call order (the repeat appends nothing).
    expect(kinds.filter((k) => k.startsWith('langgraph/'))).toEqual(['langgraph/writes', 'langgraph/writes', 'langgraph/checkpoint'])
    expect(kinds[0]).toBe('turn/start')
    expect(kinds.at(-1)).toBe('turn/end')
    expect(kinds.filter((k) => k === 'turn/start').length).toBe(append.mock.calls.length)
    expect((await saver.getTuple(cfg1))?.pendingWrites).toEqual([['task', 'n', 'first'], ['task-2', 'other', 1]])
    expect((await saver.getTuple(thread('group')))?.checkpoint).toEqual(c2)
    await saver.close()
  })

  it('stores Uint8Array values as base64 and gives them back byte for byte', async () => {
    const { persistence, saver } = await saverAt()
    const bytes = new Uint8Array([0, 255, 10, 13, 128])
    const cfg = await saver.put(thread('bytes'), checkpoint({ blob: bytes }), meta(0), { blob: 1 })
    await saver.putWrites(cfg, [['blob', new Uint8Array([1, 2, 3])]], 'task')
    const events = await logEvents(persistence.locate({ id: 'langgraph:bytes', createdAt: 0, delegationDepth: 0 }).path)
    expect(events[1]!.data.values).toEqual([{ channel: 'blob', version: 1, value: { type: 'bytes', base64: 'AP8KDYA=' } }])
    await saver.close()
    const fresh = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: (persistence as { root: string }).root }) })
    const tuple = await fresh.getTuple(cfg)
    expect(tuple?.checkpoint.channel_values.blob).toEqual(bytes)
    expect(tuple?.pendingWrites).toEqual([['task', 'blob', new Uint8Array([1, 2, 3])]])
    await fresh.close()
  })
})
