// A thread is held (its lock taken) only while it is used: another instance writing it gets
// E_LOCKED and reads it from a lock-free snapshot; after idleMs, or release(), it can move to
// the other instance. deleteThread goes through the backend's delete.
import { rm } from 'node:fs/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { checkpoint, codeOf, freshRoot, logEvents, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
const savers: SessionCheckpointSaver[] = []
afterEach(async () => {
  await Promise.all(savers.splice(0).map((s) => s.close()))
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

async function twoInstances(idleMs?: number) {
  const root = await freshRoot()
  roots.push(root)
  const make = () => {
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), ...(idleMs === undefined ? {} : { idleMs }) })
    savers.push(saver)
    return saver
  }
  return { root, a: make(), b: make() }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('one writer per thread', () => {
  it('a second instance gets E_LOCKED on put while the first holds the thread, and nothing of it is stored', async () => {
    const { a, b } = await twoInstances()
    const first = checkpoint({ n: 1 })
    const cfg = await a.put(thread('t'), first, meta(0), { n: 1 })
    expect(await codeOf(b.put(cfg, checkpoint({ n: 2 }, { n: 2 }), meta(1), { n: 2 }))).toBe('E_LOCKED')
    expect(await codeOf(b.putWrites(cfg, [['n', 2]], 'task'))).toBe('E_LOCKED')
    // Reads are never refused: b sees a's checkpoint through a snapshot.
    expect((await b.getTuple(thread('t')))?.checkpoint).toEqual(first)
    const listed = []
    for await (const t of b.list(thread('t'))) listed.push(t.checkpoint.id)
    expect(listed).toEqual([first.id])
    // a goes on writing as if nothing happened.
    const second = checkpoint({ n: 3 }, { n: 3 })
    await a.put(cfg, second, meta(1), { n: 3 })
    expect((await a.getTuple(thread('t')))?.checkpoint).toEqual(second)
  })

  it('release() hands the thread over at once; the other instance then continues the same log', async () => {
    const { root, a, b } = await twoInstances()
    const cfg = await a.put(thread('move'), checkpoint({ n: 1 }), meta(0), { n: 1 })
    await a.release('move')
    const next = checkpoint({ n: 2 }, { n: 2 })
    const cfg2 = await b.put(cfg, next, meta(1), { n: 2 })
    expect((await b.getTuple(cfg2))?.parentConfig?.configurable?.checkpoint_id).toBe(cfg.configurable?.checkpoint_id)
    // a now reads b's checkpoint from a snapshot (b holds the thread) and cannot write.
    expect((await a.getTuple(thread('move')))?.checkpoint).toEqual(next)
    expect(await codeOf(a.put(cfg2, checkpoint({ n: 3 }, { n: 3 }), meta(2), { n: 3 }))).toBe('E_LOCKED')
    const path = createJsonlPersistence({ root }).locate({ id: 'langgraph:move', createdAt: 0, delegationDepth: 0 }).path
    expect((await logEvents(path)).map((e) => e.type).filter((t) => t.startsWith('langgraph/'))).toEqual(['langgraph/checkpoint', 'langgraph/checkpoint'])
  })

  it('an idle thread is closed after idleMs, so another instance can take it without help', async () => {
    // An idle time a loaded machine cannot pass between a's put and b's first try (with 50 ms it
    // could, as the Claude store's test did), and b's put retried until a has let go.
    const { a, b } = await twoInstances(1000)
    const cfg = await a.put(thread('idle'), checkpoint({ n: 1 }), meta(0), { n: 1 })
    expect(await codeOf(b.put(cfg, checkpoint({ n: 2 }, { n: 2 }), meta(1), { n: 2 }))).toBe('E_LOCKED')
    const c2 = checkpoint({ n: 2 }, { n: 2 })
    for (let waited = 0; ; waited += 100) {
      const code = await codeOf(b.put(cfg, c2, meta(1), { n: 2 }))
      if (code !== 'E_LOCKED' || waited >= 15_000) {
        expect(code).toBeUndefined() // resolved
        break
      }
      await sleep(100)
    }
    // a's index was dropped with its lock: it reads b's write, not a stale view.
    expect((await a.getTuple(thread('idle')))?.checkpoint).toEqual(c2)
  })

  it('deleteThread removes the thread everywhere; E_LOCKED while another instance holds it', async () => {
    const { a, b } = await twoInstances()
    await a.put(thread('del'), checkpoint(), meta(0), {})
    await a.put(thread('keep'), checkpoint(), meta(0), {})
    expect(await codeOf(b.deleteThread('del'))).toBe('E_LOCKED')
    await a.deleteThread('del')
    expect(await a.getTuple(thread('del'))).toBeUndefined()
    expect(await b.getTuple(thread('del'))).toBeUndefined()
    expect(await a.getTuple(thread('keep'))).toBeDefined()
    // Deleting a thread that was never written is a no-op, as in MemorySaver.
    await a.deleteThread('never-written')
    expect(await a.getTuple(thread('never-written'))).toBeUndefined()
  })
})
