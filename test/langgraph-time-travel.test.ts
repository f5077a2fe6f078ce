// Time travel through a real graph: getStateHistory lists a thread's checkpoints, updateState on
// an old one forks the thread, and a run from the fork goes on from the updated state while the
// original branch stays readable — the same states MemorySaver gives, read back after a restart.
import { rm } from 'node:fs/promises'
import { type BaseCheckpointSaver, MemorySaver } from '@langchain/langgraph-checkpoint'
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
import { afterEach, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { freshRoot } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

const State = Annotation.Root({
  count: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  trail: Annotation<number[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
})
const build = (checkpointer: BaseCheckpointSaver) =>
  new StateGraph(State)
    .addNode('step', (s) => ({ count: s.count + 1, trail: [s.count + 1] }))
    .addEdge(START, 'step')
    .addConditionalEdges('step', (s) => (s.count % 10 < 4 ? 'step' : END), ['step', END])
    .compile({ checkpointer })

/** Runs, forks at count 2 with count 40, runs the fork; returns what a reader sees afterwards. */
async function scenario(writer: BaseCheckpointSaver, reader: () => Promise<BaseCheckpointSaver>) {
  const graph = build(writer)
  const config = { configurable: { thread_id: 'tt' } }
  await graph.invoke({ count: 0 }, { ...config, durability: 'sync' as const })
  const history = []
  for await (const s of graph.getStateHistory(config)) history.push(s)
  const forked = await graph.updateState(history.find((s) => s.values.count === 2)!.config, { count: 40 })
  await graph.invoke(null, { ...forked, durability: 'sync' as const })
  const again = build(await reader())
  const branches = []
  for await (const s of again.getStateHistory(config)) branches.push([s.metadata?.source, s.metadata?.step, s.values, s.next])
  return {
    latest: (await again.getState(config)).values,
    original: (await again.getState(history[0]!.config)).values,
    branches,
  }
}

describe('time travel', () => {
  it('forks from an old checkpoint exactly as MemorySaver does, and reads both branches after a restart', async () => {
    const root = await freshRoot()
    roots.push(root)
    const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    const ours = await scenario(writer, async () => {
      await writer.close()
      return new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    })
    const memory = new MemorySaver()
    const theirs = await scenario(memory, async () => memory)
    expect(ours.latest).toEqual({ count: 44, trail: [1, 2, 41, 42, 43, 44] })
    expect(ours.original).toEqual({ count: 4, trail: [1, 2, 3, 4] })
    expect(ours).toEqual(theirs)
    expect(ours.branches.map((b) => b[0])).toContain('update')
  })
})
