import { HumanMessage } from '@langchain/core/messages'
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint'
import { expect, test } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { cliInProcess } from './helpers/cli-in-process.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A LangGraph thread stores each value as the serializer's JSON inside a string. `redact`
// applied its pattern to that text, so `password: .*` ran through the quotes and braces after the
// secret and the thread could not be read again (a raw SyntaxError), while `verify` said ok.

test('redact of a LangGraph thread replaces the secret inside its stored values; the thread reads on', async () => {
  const root = await tmpRoot()
  const saver = () => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: 0 })
  const config = { configurable: { thread_id: 'R' } }
  const messages = [new HumanMessage('my password: hunter2\nplease deploy'), new HumanMessage('no secret here')]
  const s = saver()
  const written = await s.put(config, { ...emptyCheckpoint(), id: uuid6(0), channel_values: { messages }, channel_versions: { messages: 1 } }, { source: 'loop', step: 0, parents: {} }, { messages: 1 })
  await s.putWrites(written, [['messages', [new HumanMessage('write with password: swordfish')]]], 'task-1')
  await s.close()

  const run = await cliInProcess(['--root', root, 'redact', 'langgraph:R', '--pattern', 'password: .*'])
  expect([run.result, run.err]).toEqual([0, ''])

  const r = saver()
  const tuple = await r.getTuple(config)
  expect((tuple!.checkpoint.channel_values.messages as HumanMessage[]).map((m) => m.content)).toEqual(['my [REDACTED]\nplease deploy', 'no secret here'])
  expect(tuple!.pendingWrites!.map(([, channel, value]) => [channel, (value as HumanMessage[]).map((m) => m.content)])).toEqual([['messages', ['write with [REDACTED]']]])
  await r.close()
})

test('a stored value whose JSON text is not JSON.stringify output (an indenting serializer) is redacted as the JSON it holds too', async () => {
  const { redactEvent } = await import('../src/jsonl/maintenance.js')
  const text = '{\n  "note": "password: hunter2",\n  "n": 1\n}'
  const event = { seq: 3, type: 'langgraph/checkpoint', time: 1, data: { values: [{ type: 'json', text }, { type: 'json', text: '{ "clean": true }' }] } }
  const { event: out, matches } = redactEvent(event as never, /password: .*/gu, '[REDACTED]')
  expect(matches).toBe(1)
  const values = (out.data as { values: { type: string; text: string }[] }).values
  expect(JSON.parse(values[0]!.text)).toEqual({ note: '[REDACTED]', n: 1 })
  expect(values[1]!.text).toBe('{ "clean": true }') // no match: its bytes kept
  // Outside LangGraph's events a string is a string.
  expect((redactEvent({ ...event, type: 'user/message' } as never, /password: .*/gu, '[REDACTED]').event.data as { values: { text: string }[] }).values[0]!.text).toBe('{\n  "note": "[REDACTED]\n  "n": 1\n}')
})
