// Each of LangGraph's durability modes through the saver over JSONL: what a restarted process
// reads back is the state the run ended with, and the checkpoints each mode writes ('sync' and
// 'async' one per super-step, 'exit' one per run).
import { rm } from 'node:fs/promises'
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
  seen: Annotation<number[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
})
const graphWith = (checkpointer: SessionCheckpointSaver) =>
  new StateGraph(State)
    .addNode('step', (s) => ({ count: s.count + 1, seen: [s.count + 1] }))
    .addEdge(START, 'step')
    .addConditionalEdges('step', (s) => (s.count < 5 ? 'step' : END), ['step', END])
    .compile({ checkpointer })

describe.each([
  ['sync', 7],
  ['async', 7],
  ['exit', 1],
] as const)("durability '%s'", (durability, checkpoints) => {
  it('a restarted saver reads the final state back', async () => {
    const root = await freshRoot()
    roots.push(root)
    const config = { configurable: { thread_id: `run-${durability}` } }
    const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    const out = await graphWith(writer).invoke({ count: 0 }, { ...config, durability })
    expect(out).toEqual({ count: 5, seen: [1, 2, 3, 4, 5] })
    await writer.close()

    const reader = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    const state = await graphWith(reader).getState(config)
    expect(state.values).toEqual({ count: 5, seen: [1, 2, 3, 4, 5] })
    expect(state.next).toEqual([])
    let n = 0
    for await (const _ of reader.list(config)) n++
    expect(n).toBe(checkpoints)
    await reader.close()
  })
})
