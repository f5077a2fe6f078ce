// The saver's linger before an append: calls made in the same macrotask (LangGraph's
// `putWrites` of a task, then the `put` of the super-step, with `durability: 'sync'`) go in ONE
// append, one sync; each still resolves only once that append has resolved, and an append that
// fails fails exactly the calls it carried, leaving nothing of them in the index.
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import type { SessionEvent } from '../src/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { checkpoint, codeOf, meta, thread } from './helpers/langgraph-checkpoints.js'

/** A backend whose appends are recorded and can be held (until released) or made to fail. */
function gatedPersistence(inner: SessionPersistence = createMemoryPersistence()) {
  const appends: SessionEvent[][] = []
  let hold: { promise: Promise<void>; release: () => void } | undefined
  let failNext: Error | undefined
  const persistence = new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'append') {
        return async (id: string, events: readonly SessionEvent[]) => {
          appends.push([...events])
          const held = hold
          if (held) await held.promise
          if (failNext) {
            const err = failNext
            failNext = undefined
            throw err
          }
          await target.append(id, events)
        }
      }
      const v = Reflect.get(target, key, receiver)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
  return {
    persistence,
    appends,
    holdAppends() {
      let release!: () => void
      const promise = new Promise<void>((r) => (release = r))
      hold = { promise, release }
      return () => {
        hold = undefined
        release()
      }
    },
    failNextAppend(err: Error) {
      failNext = err
    },
  }
}

const types = (events: readonly SessionEvent[]) => events.map((e) => e.type)
/** Lets every pending macrotask (and the saver's linger) run. */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r))
}

/**
 * Calls `fn` some promise hops later, in the same macrotask: as LangGraph calls a super-step's
 * `put` after its task's `putWrites` (by then a flush without a linger has taken its queue).
 */
async function hopsLater<T>(fn: () => Promise<T>, hops = 20): Promise<T> {
  for (let i = 0; i < hops; i++) await null
  return fn()
}

/** Records when a promise settles, without awaiting it. */
function track<T>(p: Promise<T>) {
  const state = { settled: false, error: undefined as unknown }
  p.then(
    () => (state.settled = true),
    (err) => {
      state.settled = true
      state.error = err
    },
  )
  return state
}

describe('calls issued together go in one append', () => {
  it('putWrites then put in the same macrotask: one append, both records in call order', async () => {
    const g = gatedPersistence()
    const saver = new SessionCheckpointSaver({ persistence: g.persistence, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })
    expect(g.appends).toHaveLength(1)

    const second = checkpoint({ a: 2 }, { a: 2 })
    const writes = saver.putWrites(firstConfig, [['a', 2]], 'task-1')
    const put = hopsLater(() => saver.put(firstConfig, second, meta(1), { a: 2 }))
    await Promise.all([writes, put])

    expect(g.appends).toHaveLength(2)
    expect(types(g.appends[1]!)).toEqual(['turn/start', 'langgraph/writes', 'langgraph/checkpoint', 'turn/end'])
    const tuple = await saver.getTuple(thread('t'))
    expect(tuple?.checkpoint.id).toBe(second.id)
    expect(tuple?.parentConfig?.configurable?.checkpoint_id).toBe(first.id)
    const parent = await saver.getTuple(firstConfig)
    expect(parent?.pendingWrites).toEqual([['task-1', 'a', 2]])
    await saver.close()
  })

  it('each call resolves only after the append that carries it has resolved', async () => {
    const g = gatedPersistence()
    const saver = new SessionCheckpointSaver({ persistence: g.persistence, idleMs: Infinity })
    const firstConfig = await saver.put(thread('t'), checkpoint({ a: 1 }), meta(0), { a: 1 })

    const release = g.holdAppends()
    const writes = track(saver.putWrites(firstConfig, [['a', 2]], 'task-1'))
    const put = track(hopsLater(() => saver.put(firstConfig, checkpoint({ a: 2 }, { a: 2 }), meta(1), { a: 2 })))
    await turns()
    // The append was asked for (with both calls' events) and has not resolved: neither has either call.
    expect(g.appends).toHaveLength(2)
    expect(types(g.appends[1]!)).toEqual(['turn/start', 'langgraph/writes', 'langgraph/checkpoint', 'turn/end'])
    expect(writes.settled).toBe(false)
    expect(put.settled).toBe(false)

    release()
    await turns()
    expect(writes).toEqual({ settled: true, error: undefined })
    expect(put).toEqual({ settled: true, error: undefined })
    await saver.close()
  })

  it('a failed append rejects every call it carried, and the index keeps none of them', async () => {
    const inner = createMemoryPersistence()
    const g = gatedPersistence(inner)
    const saver = new SessionCheckpointSaver({ persistence: g.persistence, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })

    const failure = Object.assign(new Error('the disk said no'), { code: 'E_IO' })
    g.failNextAppend(failure)
    const failed = checkpoint({ a: 2 }, { a: 2 })
    const writes = saver.putWrites(firstConfig, [['a', 2]], 'task-1')
    const put = hopsLater(() => saver.put(firstConfig, failed, meta(1), { a: 2 }))
    expect(await codeOf(writes)).toBe('E_IO')
    expect(await codeOf(put)).toBe('E_IO')
    expect(g.appends).toHaveLength(2) // one append carried both, and failed

    // Neither the checkpoint nor the writes of the failed append are read back ...
    const latest = await saver.getTuple(thread('t'))
    expect(latest?.checkpoint.id).toBe(first.id)
    expect(latest?.pendingWrites).toEqual([])
    expect(await saver.getTuple(thread('t', failed.id))).toBeUndefined()
    const ids: string[] = []
    for await (const t of saver.list(thread('t'))) ids.push(t.checkpoint.id)
    expect(ids).toEqual([first.id])

    // ... and the saver goes on from what the log holds: the same calls again succeed, in one append.
    await Promise.all([saver.putWrites(firstConfig, [['a', 2]], 'task-1'), hopsLater(() => saver.put(firstConfig, failed, meta(1), { a: 2 }))])
    expect(g.appends).toHaveLength(3)
    expect((await saver.getTuple(thread('t')))?.checkpoint.id).toBe(failed.id)
    expect((await saver.getTuple(firstConfig))?.pendingWrites).toEqual([['task-1', 'a', 2]])
    await saver.close()
    const stored = (await inner.inspect('langgraph:t')).events
    // Seqs stay contiguous across the failure: nothing of the failed append reached the log.
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i))
    expect(stored.filter((e) => e.type === 'langgraph/checkpoint')).toHaveLength(2)
  })

  it('a call whose serialization fails is rejected alone; the others of its batch are appended', async () => {
    const g = gatedPersistence()
    const saver = new SessionCheckpointSaver({ persistence: g.persistence, idleMs: Infinity })
    const firstConfig = await saver.put(thread('t'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    const bad = saver.putWrites(firstConfig, [['a', 10n]], 'task-bad')
    const good = hopsLater(() => saver.putWrites(firstConfig, [['a', 2]], 'task-good'))
    expect(await codeOf(bad)).toBe('E_NOT_JSON')
    await good
    expect(g.appends).toHaveLength(2)
    expect(types(g.appends[1]!)).toEqual(['turn/start', 'langgraph/writes', 'turn/end'])
    expect((await saver.getTuple(firstConfig))?.pendingWrites).toEqual([['task-good', 'a', 2]])
    await saver.close()
  })
})

describe("a StateGraph run with durability 'sync'", () => {
  const State = Annotation.Root({ count: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }) })
  const STEPS = 6

  it("makes one append per super-step: the task's writes and the next checkpoint together", async () => {
    const g = gatedPersistence()
    const saver = new SessionCheckpointSaver({ persistence: g.persistence, idleMs: Infinity })
    const graph = new StateGraph(State)
      .addNode('step', (s) => ({ count: s.count + 1 }))
      .addEdge(START, 'step')
      .addConditionalEdges('step', (s) => (s.count < STEPS ? 'step' : END), ['step', END])
      .compile({ checkpointer: saver })
    const out = await graph.invoke({ count: 0 }, { configurable: { thread_id: 'run' }, durability: 'sync' })
    expect(out).toEqual({ count: STEPS })

    // Every append that carries writes also carries the checkpoint they lead to (the first: the
    // input's checkpoint with the input's writes), instead of an append for each.
    const checkpoints = g.appends.flat().filter((e) => e.type === 'langgraph/checkpoint')
    expect(checkpoints).toHaveLength(STEPS + 2) // the input, the first loop checkpoint, one per step
    const steps = g.appends.filter((a) => a.some((e) => e.type === 'langgraph/writes'))
    expect(steps.length).toBeGreaterThanOrEqual(STEPS)
    for (const a of steps) {
      const writes = a.filter((e) => e.type === 'langgraph/writes').map((e) => (e.data as { checkpoint: string }).checkpoint)
      const puts = a.filter((e) => e.type === 'langgraph/checkpoint').map((e) => e.data as { id: string; parent?: string })
      expect(puts).toHaveLength(1)
      const { id, parent } = puts[0]!
      expect(writes).toEqual([parent === undefined ? id : parent])
    }
    // The input's append, the first loop checkpoint's, one per step (two per step without the linger).
    expect(g.appends).toHaveLength(STEPS + 2)
    await saver.close()
  })
})
