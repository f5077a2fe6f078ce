// Calls that share one append (the saver's group commit) do not share a refusal: when the backend
// refuses one call's event (a checkpoint whose line is over 64 MiB, §15.5) or one call's events
// cannot be made, that call alone rejects; the others of the group are appended and resolve, and
// what the saver answers afterwards is what the log holds (a fresh saver over the root agrees).
import { rm } from 'node:fs/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { NamespaceIndex } from '../src/adapters/langgraph/thread-index.js'
import { createJsonlPersistence, type SessionEvent, SessionPersistenceError } from '../src/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { checkpoint, codeOf, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  vi.restoreAllMocks()
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

/** A JSONL backend whose appends are counted (each one with the event types it carried). */
async function countedJsonl() {
  const root = await freshRoot()
  roots.push(root)
  const inner = createJsonlPersistence({ root })
  const appends: string[][] = []
  const failures: Error[] = []
  const persistence = new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'append') {
        return async (id: string, events: readonly SessionEvent[]) => {
          appends.push(events.map((e) => e.type))
          const failure = failures.shift()
          if (failure) throw failure
          return target.append(id, events)
        }
      }
      const v = Reflect.get(target, key, receiver)
      return typeof v === 'function' ? v.bind(target) : v
    },
  }) as SessionPersistence
  return { root, persistence, appends, failNextAppend: (err: Error) => failures.push(err) }
}

/** What a fresh saver over the root reads: each checkpoint id of the thread, newest first, with its pending writes. */
async function readBack(root: string, threadId: string) {
  const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
  const out: { id: string; writes: unknown[] }[] = []
  for await (const t of saver.list(thread(threadId))) out.push({ id: t.checkpoint.id, writes: t.pendingWrites ?? [] })
  await saver.close()
  return out
}

async function logOf(root: string, threadId: string) {
  return (await createJsonlPersistence({ root }).inspect(`langgraph:${threadId}`)).events
}

describe('a call the backend refuses rejects alone; the rest of its group is appended', () => {
  it('a put over the 64 MiB line limit, queued between two putWrites: only the put rejects (E_INVALID_EVENT)', async () => {
    const { root, persistence, appends } = await countedJsonl()
    const saver = new SessionCheckpointSaver({ persistence, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })

    // Made in one tick, as LangGraph's `durability: 'async'` does: they queue for one append.
    const huge = checkpoint({ a: 'x'.repeat(64 * 1024 * 1024) }, { a: 2 })
    const before = saver.putWrites(firstConfig, [['a', 2]], 'task-1')
    const put = saver.put(firstConfig, huge, meta(1), { a: 2 })
    const after = saver.putWrites(firstConfig, [['b', 3]], 'task-2')
    const [beforeCode, putCode, afterCode] = await Promise.all([codeOf(before), codeOf(put), codeOf(after)])
    expect(putCode).toBe('E_INVALID_EVENT')
    expect(beforeCode).toBeUndefined()
    expect(afterCode).toBeUndefined()
    // The three went to the backend together first (refused as a whole, nothing written), then each on its own.
    expect(appends.slice(1)).toEqual([
      ['turn/start', 'langgraph/writes', 'langgraph/checkpoint', 'langgraph/writes', 'turn/end'],
      ['turn/start', 'langgraph/writes', 'turn/end'],
      ['turn/start', 'langgraph/checkpoint', 'turn/end'],
      ['turn/start', 'langgraph/writes', 'turn/end'],
    ])

    const expected = [{ id: first.id, writes: [['task-1', 'a', 2], ['task-2', 'b', 3]] }]
    const tuple = await saver.getTuple(thread('t'))
    expect(tuple?.checkpoint.id).toBe(first.id)
    expect(tuple?.pendingWrites).toEqual(expected[0]!.writes)
    expect(await saver.getTuple(thread('t', huge.id))).toBeUndefined()
    const listed: { id: string; writes: unknown[] }[] = []
    for await (const t of saver.list(thread('t'))) listed.push({ id: t.checkpoint.id, writes: t.pendingWrites ?? [] })
    expect(listed).toEqual(expected)

    // The saver goes on: a later put appends after what the log holds.
    const second = checkpoint({ a: 2 }, { a: 2 })
    await saver.put(firstConfig, second, meta(1), { a: 2 })
    expect((await saver.getTuple(thread('t')))?.checkpoint.id).toBe(second.id)
    await saver.close()

    expect(await readBack(root, 't')).toEqual([{ id: second.id, writes: [] }, ...expected])
    const events = await logOf(root, 't')
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    expect(events.filter((e) => e.type === 'langgraph/checkpoint').map((e) => (e.data as { id: string }).id)).toEqual([first.id, second.id])
    expect(events.filter((e) => e.type === 'langgraph/writes').map((e) => (e.data as { task: string }).task)).toEqual(['task-1', 'task-2'])
  })

  it('a failure that is no call\'s fault (E_IO) still rejects every call of the group, and none is retried alone', async () => {
    const { root, persistence, appends, failNextAppend } = await countedJsonl()
    const saver = new SessionCheckpointSaver({ persistence, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })

    failNextAppend(new SessionPersistenceError('E_IO', 'the disk said no'))
    const calls = [saver.putWrites(firstConfig, [['a', 2]], 'task-1'), saver.put(firstConfig, checkpoint({ a: 2 }, { a: 2 }), meta(1), { a: 2 })]
    expect(await Promise.all(calls.map((c) => codeOf(c)))).toEqual(['E_IO', 'E_IO'])
    expect(appends).toHaveLength(2)
    expect((await saver.getTuple(thread('t')))?.checkpoint.id).toBe(first.id)
    expect((await saver.getTuple(thread('t')))?.pendingWrites).toEqual([])
    await saver.close()
    expect(await readBack(root, 't')).toEqual([{ id: first.id, writes: [] }])
  })

  it('a call whose events cannot be made rejects alone, with a stable code; the index keeps nothing of it', async () => {
    const { root, persistence, appends } = await countedJsonl()
    const saver = new SessionCheckpointSaver({ persistence, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })

    // A fault in building one call's events (after the call before it was taken into the index).
    const original = NamespaceIndex.prototype.effectiveWrites
    vi.spyOn(NamespaceIndex.prototype, 'effectiveWrites').mockImplementation(function (this: NamespaceIndex, cp, task, writes) {
      if (task === 'task-bad') throw new Error('cannot build this one')
      return original.call(this, cp, task, writes)
    })
    const second = checkpoint({ a: 2 }, { a: 2 })
    const good = saver.putWrites(firstConfig, [['a', 2]], 'task-good')
    const bad = saver.putWrites(firstConfig, [['a', 9]], 'task-bad')
    const put = saver.put(firstConfig, second, meta(1), { a: 2 })
    const [goodCode, badCode, putCode] = await Promise.all([codeOf(good), codeOf(bad), codeOf(put)])
    expect(badCode).toMatch(/^E_/)
    expect(goodCode).toBeUndefined()
    expect(putCode).toBeUndefined()
    // What was appended: the two good calls, together.
    expect(appends.slice(1)).toEqual([['turn/start', 'langgraph/writes', 'langgraph/checkpoint', 'turn/end']])

    vi.restoreAllMocks()
    const expected = [
      { id: second.id, writes: [] },
      { id: first.id, writes: [['task-good', 'a', 2]] },
    ]
    const listed: { id: string; writes: unknown[] }[] = []
    for await (const t of saver.list(thread('t'))) listed.push({ id: t.checkpoint.id, writes: t.pendingWrites ?? [] })
    expect(listed).toEqual(expected)
    // The next call is not hurt by the failed one.
    await saver.putWrites(thread('t', second.id), [['a', 3]], 'task-next')
    expect((await saver.getTuple(thread('t')))?.pendingWrites).toEqual([['task-next', 'a', 3]])
    await saver.close()

    expect(await readBack(root, 't')).toEqual([{ id: second.id, writes: [['task-next', 'a', 3]] }, expected[1]])
    const events = await logOf(root, 't')
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
  })
})
