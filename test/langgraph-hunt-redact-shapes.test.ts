import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint'
import { Send } from '@langchain/langgraph'
import { expect, test } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A review of the structure-keeping redaction (langgraph-hunt-redact.test.ts): it kept the `type`
// and `id` of ANY object with an `lc` field, so a user's object of that shape kept its secret (0
// matches reported); it still replaced serializer structure the first fix did not list — the
// `method` of a Uint8Array's record (`from`: read back as a plain object) and the `node` of a
// Send on the tasks channel (`worker`: sent to no node); and nothing checked the metadata's
// `source`/`step`, which it lists as structure.

const config = { configurable: { thread_id: 'S' } }
const saver = (root: string) => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: 0 })

async function stored(root: string) {
  const s = saver(root)
  const c = await s.put(
    config,
    {
      ...emptyCheckpoint(),
      id: uuid6(0),
      channel_values: { lead: { lc: 'lead-contact', id: 'hunter2', type: 'hunter2 note' }, bytes: new Uint8Array([1, 2, 3]) },
      channel_versions: { lead: 1, bytes: 1 },
    },
    { source: 'loop', step: 0, parents: {}, user: { lc: 1, id: 'hunter2' } } as never,
    { lead: 1, bytes: 1 },
  )
  await s.putWrites(c, [['__pregel_tasks', new Send('worker', { q: 'hunter2' })]], 'task-1')
  await s.close()
}

async function read(root: string) {
  const r = saver(root)
  try {
    const t = (await r.getTuple(config))!
    return { values: t.checkpoint.channel_values, metadata: t.metadata as Record<string, unknown>, writes: t.pendingWrites ?? [] }
  } finally {
    await r.close()
  }
}

test('redact in a LangGraph thread: a user object with an lc field is content; a Uint8Array record and a Send keep what they are read back as; the metadata source/step are kept', async () => {
  const root = await tmpRoot()
  await stored(root)
  const before = await read(root)
  expect(before.values.bytes).toBeInstanceOf(Uint8Array)
  const result = await createJsonlPersistence({ root }).redact('langgraph:S', { pattern: 'from|worker|loop|hunter2' })
  const after = await read(root)
  // Content: the user's objects, whatever their fields are called.
  expect(after.values.lead).toEqual({ lc: 'lead-contact', id: '[REDACTED]', type: '[REDACTED] note' })
  expect(after.metadata.user).toEqual({ lc: 1, id: '[REDACTED]' })
  // Structure: the record a Uint8Array is read back from, a Send's node, the metadata's source.
  expect(after.values.bytes).toBeInstanceOf(Uint8Array)
  expect([...(after.values.bytes as Uint8Array)]).toEqual([1, 2, 3])
  expect(after.writes).toHaveLength(1)
  const [task, channel, send] = after.writes[0]!
  expect([task, channel, (send as { node: string }).node]).toEqual(['task-1', '__pregel_tasks', 'worker'])
  expect((send as { args: unknown }).args).toEqual({ q: '[REDACTED]' })
  expect([after.metadata.source, after.metadata.step]).toEqual([before.metadata.source, before.metadata.step])
  expect(JSON.stringify(after)).not.toContain('hunter2')
  expect(result.matches).toBe(4) // the lead's id and type, the metadata's id, the Send's args
})
