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
