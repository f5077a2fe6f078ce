// The AI SDK recorder and what the backend refuses (§4.3, §15.5): an event over the 64 MiB a line
// holds, or not plain JSON. A refused batch takes no seq: a tool result too long is recorded as
// an error result naming the refusal and the turn goes on; input is refused by turn() before the
// turn starts; any other event refused ends the turn as an error, closed and balanced, and
// `done` rejects with the refusal. The session goes on at the next seqs in every case; what is
// on disk is checked through a fresh load.
import { generateText, jsonSchema, type ModelMessage, stepCountIs, tool } from 'ai'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession, toAiSdkMessages } from '../src/adapters/ai-sdk/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { findOpenTurn } from '../src/session/closers.js'
import type { SessionEvent } from '../src/session/schema.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'
import { expectBalanced } from './helpers/ai-sdk-balanced.js'
import { codeOf, rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

const LIMIT = 64 * 1024 * 1024
const types = (events: readonly SessionEvent[]) => events.map((e) => e.type)

/** What a fresh instance loads: contiguous seqs, no repair needed, every turn closed. */
async function reloaded(root: string, id: string): Promise<readonly SessionEvent[]> {
  const persistence = createJsonlPersistence({ root, sync: 'none' })
  const loaded = await persistence.load(id)
  await persistence.close(id)
  expect(loaded.events.map((e) => e.seq)).toEqual(loaded.events.map((_, i) => i))
  expect(loaded.repair?.closers ?? []).toEqual([])
  expect(findOpenTurn(loaded.events)).toBeUndefined()
  return loaded.events
}

describe('the AI SDK recorder and a line over 64 MiB', () => {
  it('records a tool result over the limit as an error result naming its size, and goes on; turn() refuses input over it', async () => {
    const root = await tmpRoot()
    const session = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'huge-result' })
    const huge = 'x'.repeat(LIMIT + 1)

    // A tool whose output is too long: the turn is recorded, the result as an error naming the size.
    let outputSeen = 0
    const tools = { cat: tool({ inputSchema: jsonSchema<object>({ type: 'object' }), execute: async () => huge }) }
    const { model } = scriptedModel([{ calls: [{ id: 'c1', name: 'cat', input: {} }] }, { text: 'Too long to read.' }])
    const turn = session.turn('Read the log')
    expect(turn.number).toBe(1)
    const result = await generateText({ model, stopWhen: stepCountIs(5), ...turn.settings, tools: turn.guardTools(tools) })
    for (const r of result.steps.flatMap((s) => s.toolResults)) outputSeen = String(r.output).length
    expect(outputSeen).toBe(LIMIT + 1) // the run itself had the whole output
    await turn.done
    const length = session.events.length

    // Input too long: turn() throws, no turn starts, nothing is written.
    const refused = await rejection(Promise.resolve().then(() => session.turn(huge)))
    expect(refused.code).toBe('E_INVALID_EVENT')
    expect(refused.message).toMatch(/serializes to \d+ bytes; a line holds at most 67108864/)
    expect(session.currentTurn).toBeUndefined()
    expect(session.events).toHaveLength(length)

    const next = session.turn('And now?')
    expect(next.number).toBe(2)
    await next.end({ kind: 'completed' })
    await session.close()

    const events = await reloaded(root, 'huge-result')
    expect(types(events)).toEqual([
      'turn/start', 'user/message', 'step/start', 'tool/call', 'assistant/message', 'tool/result', 'step/end', 'step/start', 'assistant/message', 'step/end', 'turn/end',
      'turn/start', 'user/message', 'turn/end',
    ])
    const stored = events.find((e) => e.type === 'tool/result')!
    expect(stored.data).toMatchObject({
      turn: 1,
      step: 0,
      callId: 'c1',
      name: 'cat',
      isError: true,
      error: { name: 'SessionPersistenceError', code: 'E_INVALID_EVENT' },
    })
    const text = (stored.data as { content: { text: string }[] }).content[0]!.text
    expect(text).toMatch(new RegExp(`^Tool result not recorded: event 'tool/result' \\(seq ${stored.seq}\\) serializes to \\d+ bytes; a line holds at most 67108864 \\(64 MiB\\)\\.$`))
    expect(Number(/serializes to (\d+) bytes/.exec(text)![1])).toBeGreaterThan(LIMIT)
    expect(events[10]!.data).toEqual({ turn: 1, reason: { kind: 'completed', finishReason: 'stop' } })

    // The model's history: the call answered with that error, then the next turn.
    const messages = toAiSdkMessages(events)
    expectBalanced(messages)
    expect(messages.find((m) => m.role === 'tool')?.content[0]).toMatchObject({ toolCallId: 'c1', output: { type: 'error-text', value: text } })
    expect(messages.at(-1)).toEqual({ role: 'user', content: 'And now?' })
  })

  it('ends a turn whose tool call is over the limit as an error: the call does not run, the one recorded before it is answered in the log', async () => {
    const root = await tmpRoot()
    const session = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'huge-call' })
    const ran: string[] = []
    const tools = {
      run: tool({
        inputSchema: jsonSchema<{ script: string }>({ type: 'object', properties: { script: { type: 'string' } } }),
        execute: async ({ script }) => {
          ran.push(script.slice(0, 10))
          return 'ok'
        },
      }),
    }
    const calls = [
      { id: 'c1', name: 'run', input: { script: 'ls' } },
      { id: 'c2', name: 'run', input: { script: 'z'.repeat(LIMIT) } },
    ]
    const { model } = scriptedModel([{ text: 'Running both.', calls }, { text: 'done' }])
    const turn = session.turn('Go')
    const result = await generateText({ model, stopWhen: stepCountIs(5), ...turn.settings, tools: turn.guardTools(tools) })
    const error = await rejection(turn.done)
    expect(error.code).toBe('E_INVALID_EVENT')
    expect(error.message).toMatch(/^event 'tool\/call' \(seq 4\) serializes to \d+ bytes; a line holds at most 67108864/)
    // c2 was not on record, so the guard refused it with the refusal. (c1 too, if the refusal
    // came before it ran: the turn is over, and the log answers c1 either way.)
    expect(ran.filter((r) => r !== 'ls')).toEqual([])
    const refusedRun = result.steps[0]!.content.find((p) => p.type === 'tool-error' && p.toolCallId === 'c2')
    expect(refusedRun).toMatchObject({ toolCallId: 'c2', error: { code: 'E_INVALID_EVENT' } })
    expect(session.currentTurn).toBeUndefined()
    await session.turn('Again').end({ kind: 'completed' })
    await session.close()

    const events = await reloaded(root, 'huge-call')
    expect(types(events)).toEqual(['turn/start', 'user/message', 'step/start', 'tool/call', 'tool/result', 'step/end', 'turn/end', 'turn/start', 'user/message', 'turn/end'])
    expect(events[3]!.data).toMatchObject({ callId: 'c1' })
    expect(events[4]!.data).toEqual({
      turn: 1,
      step: 0,
      callId: 'c1',
      content: [{ type: 'text', text: `Tool call not completed: the turn ended because the session log refused one of its events (${error.message}).` }],
      isError: true,
      error: { name: 'SessionPersistenceError', code: 'E_INVALID_EVENT' },
    })
    expect(events[6]!.data).toEqual({ turn: 1, reason: { kind: 'error', code: 'E_INVALID_EVENT', message: error.message } })
    const messages = toAiSdkMessages(events)
    expectBalanced(messages)
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user'])
  })
})

describe('the AI SDK recorder and content that is not plain JSON', () => {
  it('turn() refuses input the backend would refuse: no turn starts, and the next is turn 1 at seq 0', async () => {
    const persistence = createMemoryPersistence()
    const session = await openAiSdkSession({ persistence, sessionId: 'not-json' })
    const bad = { role: 'user' as const, content: [{ type: 'text' as const, text: 'hi', providerOptions: { x: { n: 1n as never } } }] }
    expect(await codeOf(() => session.turn(bad))).toBe('E_NOT_JSON')
    expect(session.currentTurn).toBeUndefined()
    const turn = session.turn('hi')
    expect(turn.number).toBe(1)
    await turn.end({ kind: 'completed' })
    expect(session.events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'turn/start'],
      [1, 'user/message'],
      [2, 'turn/end'],
    ])
  })

  it('a tool result given as input that the log would refuse is recorded as an error result naming the refusal', async () => {
    const persistence = createMemoryPersistence()
    const session = await openAiSdkSession({ persistence, sessionId: 'client-result' })
    const ask = tool({ inputSchema: jsonSchema<object>({ type: 'object' }) }) // no execute: the app answers
    const first = scriptedModel([{ calls: [{ id: 'q1', name: 'ask', input: {} }] }])
    const turn = session.turn('Ask me')
    await generateText({ model: first.model, tools: { ask }, ...turn.settings })
    await turn.done
    const answer: ModelMessage = {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'q1', toolName: 'ask', output: { type: 'content', value: [{ type: 'text', text: 'blue', providerOptions: { p: { n: 1n as never } } }] } }],
    }
    const next = session.turn(answer)
    await next.end({ kind: 'completed' })
    const result = session.events.find((e) => e.type === 'tool/result')!
    expect(result.data).toMatchObject({ callId: 'q1', name: 'ask', isError: true, error: { name: 'SessionPersistenceError', code: 'E_NOT_JSON' } })
    expect((result.data as { content: { text: string }[] }).content[0]!.text).toMatch(/^Tool result not recorded: event 'tool\/result' \(seq \d+\): data\.content\[0\]\.providerOptions\.p\.n is a BigInt\.$/)
    const messages = toAiSdkMessages((await persistence.read('client-result')).events)
    expectBalanced(messages)
    expect(messages.find((m) => m.role === 'tool')?.content[0]).toMatchObject({ toolCallId: 'q1', output: { type: 'error-text' } })
    await session.close()
  })

  it('ends a turn whose assistant message is not plain JSON as an error, keeping what fits of its batch', async () => {
    const root = await tmpRoot()
    const session = await openAiSdkSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: 'bad-message' })
    let runs = 0
    const tools = { add: tool({ inputSchema: jsonSchema<object>({ type: 'object' }), execute: async () => ++runs }) }
    const { model } = scriptedModel([{ calls: [{ id: 'c1', name: 'add', input: {} }] }, { text: 'done' }])
    const generate = model.doGenerate.bind(model)
    let call = 0
    model.doGenerate = async (options) => {
      const out = await generate(options)
      // The first step's text carries provider metadata JSON cannot hold: its assistant message is refused.
      if (call++ === 0) out.content.unshift({ type: 'text', text: 'Adding.', providerMetadata: { p: { n: 1n as never } } })
      return out
    }
    const turn = session.turn('Go')
    await generateText({ model, stopWhen: stepCountIs(5), ...turn.settings, tools: turn.guardTools(tools) })
    const error = await rejection(turn.done)
    expect(error.code).toBe('E_NOT_JSON')
    expect(error.message).toMatch(/^event 'assistant\/message' \(seq 4\): data\.content\[0\]\.providerOptions\.p\.n is a BigInt/)
    expect(runs).toBe(1)
    await session.turn('Again').end({ kind: 'completed' })
    await session.close()

    const events = await reloaded(root, 'bad-message')
    // The batch of the step's end, without the message: the call's result, step 0 closed, step 1
    // started; then step 1 closed and the turn ended as an error.
    expect(types(events)).toEqual([
      'turn/start', 'user/message', 'step/start', 'tool/call', 'tool/result', 'step/end', 'step/start', 'step/end', 'turn/end',
      'turn/start', 'user/message', 'turn/end',
    ])
    expect(events[4]!.data).toMatchObject({ callId: 'c1', content: [{ type: 'text', text: '1' }] })
    expect(events[7]!.data).toEqual({ turn: 1, step: 1 })
    expect(events[8]!.data).toEqual({ turn: 1, reason: { kind: 'error', code: 'E_NOT_JSON', message: error.message } })
    const messages = toAiSdkMessages(events)
    expectBalanced(messages)
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user'])
  })
})
