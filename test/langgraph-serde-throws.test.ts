// A call whose serialization throws (the serializer's `dumpsTyped`, however it fails) rejects
// alone, with E_NOT_JSON: the calls queued with it are appended, and later calls of the thread
// go on from what the log holds.
import { rm } from 'node:fs/promises'
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint'
import { afterEach, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { checkpoint, codeOf, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

/** The default serializer, except for values marked `{ fail: how }`, which make it throw. */
class FailingSerde extends JsonPlusSerializer {
  override dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
    const how = (value as { fail?: string } | null)?.fail
    if (how === 'sync') throw new Error('cannot serialize (thrown)')
    // A thrown value that is not an Error and cannot even be turned into a string.
    if (how === 'no-string') throw Object.create(null)
    // An error whose message cannot be read.
    if (how === 'bad-message') throw Object.defineProperty(new Error(), 'message', { get: () => { throw new Error('no message') } })
    if (how === 'async') return Promise.reject(new Error('cannot serialize (rejected)'))
    return super.dumpsTyped(value)
  }
}

describe.each(['sync', 'async', 'no-string', 'bad-message'])("a serializer that fails ('%s')", (how) => {
  it('rejects its call alone (E_NOT_JSON); the calls around it are appended and later calls go on', async () => {
    const root = await freshRoot()
    roots.push(root)
    const serde = new FailingSerde()
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), serde, idleMs: Infinity })
    const first = checkpoint({ a: 1 })
    const firstConfig = await saver.put(thread('t'), first, meta(0), { a: 1 })

    // One tick, so they queue for one append: a put whose channel value fails, a putWrites whose write fails.
    const badPut = checkpoint({ a: { fail: how } }, { a: 2 })
    const calls = [
      saver.putWrites(firstConfig, [['a', 2]], 'task-1'),
      saver.put(firstConfig, badPut, meta(1), { a: 2 }),
      saver.putWrites(firstConfig, [['b', { fail: how }]], 'task-bad'),
      saver.putWrites(firstConfig, [['b', 3]], 'task-2'),
    ]
    expect(await Promise.all(calls.map((c) => codeOf(c)))).toEqual([undefined, 'E_NOT_JSON', 'E_NOT_JSON', undefined])

    const second = checkpoint({ a: 2 }, { a: 2 })
    await saver.put(firstConfig, second, meta(1), { a: 2 })
    await saver.putWrites(thread('t', second.id), [['a', 3]], 'task-3')
    const expected = [
      { id: second.id, writes: [['task-3', 'a', 3]] },
      { id: first.id, writes: [['task-1', 'a', 2], ['task-2', 'b', 3]] },
    ]
    const listed = async (s: SessionCheckpointSaver) => {
      const out: { id: string; writes: unknown[] }[] = []
      for await (const t of s.list(thread('t'))) out.push({ id: t.checkpoint.id, writes: t.pendingWrites ?? [] })
      return out
    }
    expect(await listed(saver)).toEqual(expected)
    expect(await saver.getTuple(thread('t', badPut.id))).toBeUndefined()
    await saver.close()

    const fresh = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    expect(await listed(fresh)).toEqual(expected)
    await fresh.close()
    const events = (await createJsonlPersistence({ root }).inspect('langgraph:t')).events
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
  })
})
