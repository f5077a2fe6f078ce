import { AIMessage, HumanMessage } from '@langchain/core/messages'
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint'
import { expect, test } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { CHECKPOINT_EVENT, WRITES_EVENT } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { LANGGRAPH_STRUCTURE } from '../src/jsonl/maintenance.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `redact` replaced every string of a LangGraph thread's events: an ordinary word (`messages`)
// hit the serializer's own structure (a message's `{lc, type: 'constructor', id: [...]}`) and
// the thread no longer read back (E_CORRUPT 'Invalid namespace'), a UUID pattern turned every
// checkpoint id and parent into '[REDACTED]' (the thread listed one checkpoint) — while verify
// said ok. Only the content strings of the stored values are redacted now.

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

async function thread(root: string) {
  const saver = () => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: 0 })
  const config = { configurable: { thread_id: 'R' } }
  const s = saver()
  const c1 = await s.put(
    config,
    { ...emptyCheckpoint(), id: uuid6(0), channel_values: { messages: [new HumanMessage('hi, my key is 0f8fad5b-d9cb-469f-a165-70867728950e and hunter2')] }, channel_versions: { messages: 1 } },
    { source: 'loop', step: 0, parents: {} },
    { messages: 1 },
  )
  const c2 = await s.put(
    c1,
    { ...emptyCheckpoint(), id: uuid6(1), channel_values: { messages: [new AIMessage('second messages hunter2')] }, channel_versions: { messages: 2 } },
    { source: 'loop', step: 1, parents: {} },
    { messages: 2 },
  )
  await s.putWrites(c2, [['messages', [new HumanMessage('a write about hunter2')]]], 'task-1')
  await s.close()
  return { saver, config }
}

async function read(saver: () => SessionCheckpointSaver, config: { configurable: { thread_id: string } }) {
  const r = saver()
  try {
    const list: { id: string; parent: string | undefined; messages: [string, unknown][]; writes: [string, string, [string, unknown][]][] }[] = []
    for await (const t of r.list(config)) {
      list.push({
        id: t.checkpoint.id,
        parent: t.parentConfig?.configurable?.checkpoint_id as string | undefined,
        messages: (t.checkpoint.channel_values.messages as HumanMessage[]).map((m): [string, unknown] => [m.constructor.name, m.content]),
        writes: (t.pendingWrites ?? []).map(([task, channel, value]): [string, string, [string, unknown][]] => [task, channel, (value as HumanMessage[]).map((m): [string, unknown] => [m.constructor.name, m.content])]),
      })
    }
    const latest = await r.getTuple(config)
    return { list, latest: latest?.checkpoint.id }
  } finally {
    await r.close()
  }
}

test.each([
  ['structure words', 'messages|HumanMessage|AIMessage|langchain_core|constructor|loop|task-1|hunter2'],
  ['a UUID pattern', `${UUID}|hunter2`],
])('redact with %s in a LangGraph thread replaces the content only: same checkpoints, messages deserialize', async (_name, pattern) => {
  const root = await tmpRoot()
  const { saver, config } = await thread(root)
  const before = await read(saver, config)
  expect(before.list).toHaveLength(2)

  const result = await createJsonlPersistence({ root }).redact('langgraph:R', { pattern })
  expect(result.matches).toBeGreaterThanOrEqual(3)

  const after = await read(saver, config)
  expect(after.latest).toBe(before.latest)
  expect(after.list.map((t) => [t.id, t.parent])).toEqual(before.list.map((t) => [t.id, t.parent]))
  const redactText = (s: unknown) => (s as string).replace(new RegExp(pattern, 'gu'), '[REDACTED]')
  expect(after.list.map((t) => t.messages)).toEqual(before.list.map((t) => t.messages.map(([cls, text]) => [cls, redactText(text)])))
  expect(after.list.map((t) => t.writes)).toEqual(before.list.map((t) => t.writes.map(([task, ch, msgs]) => [task, ch, msgs.map(([cls, text]) => [cls, redactText(text)])])))
  expect(JSON.stringify(after)).not.toContain('hunter2')
})

test("the structure redact keeps names every field of the adapter's records that is not content", async () => {
  const root = await tmpRoot()
  await thread(root)
  const p = createJsonlPersistence({ root })
  const { events } = await p.load('langgraph:R')
  await p.close('langgraph:R')
  // Content: what a redaction is for (the stored values, the metadata a caller adds).
  const content: Record<string, string[]> = { [CHECKPOINT_EVENT]: ['metadata', 'values'], [WRITES_EVENT]: ['writes'] }
  expect(Object.keys(LANGGRAPH_STRUCTURE).sort()).toEqual([CHECKPOINT_EVENT, WRITES_EVENT].sort())
  for (const e of events.filter((x) => x.type.startsWith('langgraph/'))) {
    const shape = LANGGRAPH_STRUCTURE[e.type] as Record<string, unknown>
    for (const field of Object.keys(e.data as object)) expect([e.type, field, field in shape || content[e.type]!.includes(field)]).toEqual([e.type, field, true])
  }
})
