// A special write (a negative index: `__interrupt__`, `__error__`, …) replaces the one stored for
// its task, as LangGraph's MemorySaver does; repeating it with the same value (and task path)
// changes nothing getTuple returns, so, as for any putWrites that would change nothing, nothing
// is appended. One with another value, or another task path, still replaces and is appended.
import { MemorySaver } from '@langchain/langgraph-checkpoint'
import type { RunnableConfig } from '@langchain/core/runnables'
import { expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { checkpoint, freshRoots, meta, thread } from './helpers/langgraph-checkpoints.js'

const root = freshRoots()

it('repeating a special write changes nothing and appends nothing; another value or task path replaces it, appended', async () => {
  const r = await root()
  const persistence = createJsonlPersistence({ root: r })
  const saver = new SessionCheckpointSaver({ persistence, idleMs: 0 })
  const memory = new MemorySaver()
  const cp = checkpoint({ a: 1 })
  const cfg: RunnableConfig = await saver.put(thread('W'), cp, meta(0), { a: 1 })
  await memory.put(thread('W'), cp, meta(0))
  const lines = async () => (await createJsonlPersistence({ root: r }).inspect('langgraph:W')).events.length
  const both = async (writes: [string, unknown][], task: string, path?: string) => {
    await saver.putWrites(cfg, writes, task, path)
    await memory.putWrites(cfg, writes, task, path)
    const ours = (await saver.getTuple(cfg))?.pendingWrites
    expect(ours).toEqual((await memory.getTuple(cfg))?.pendingWrites)
    return ours
  }

  await both([['__interrupt__', { q: 1 }], ['a', 2]], 't')
  const stored = await lines()
  // The same special write again, alone or with the regular one (kept as first written).
  expect(await both([['__interrupt__', { q: 1 }]], 't')).toEqual([['t', '__interrupt__', { q: 1 }], ['t', 'a', 2]])
  await both([['__interrupt__', { q: 1 }], ['a', 3]], 't')
  // Two of one special channel in a call: the last is what it stores, here the stored one.
  await both([['__interrupt__', { q: 9 }], ['__interrupt__', { q: 1 }]], 't')
  expect(await lines()).toBe(stored)

  // Another value replaces the stored one: appended.
  expect(await both([['__interrupt__', { q: 2 }]], 't')).toEqual([['t', '__interrupt__', { q: 2 }], ['t', 'a', 2]])
  const replaced = await lines()
  expect(replaced).toBeGreaterThan(stored)
  // So does another task path (it orders the pending writes).
  await both([['__interrupt__', { q: 2 }]], 't', 'p')
  const moved = await lines()
  expect(moved).toBeGreaterThan(replaced)
  // The same special write for another task is that task's own.
  await both([['__interrupt__', { q: 2 }]], 'u')
  expect(await lines()).toBeGreaterThan(moved)
  await saver.close()

  // Read back from the log, the thread answers the same.
  const reader = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
  expect((await reader.getTuple(cfg))?.pendingWrites).toEqual((await memory.getTuple(cfg))?.pendingWrites)
  await reader.close()
})
