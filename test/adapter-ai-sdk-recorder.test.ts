import { generateText, jsonSchema, type ModelMessage, stepCountIs, streamText, tool } from 'ai'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { computeClosers } from '../src/session/closers.js'
import type { SessionEvent } from '../src/session/schema.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../src/errors.js'
import { toModelHistory } from '../src/session/history.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { delegate } from './helpers/recorded-persistence.js'

/** The package error code a promise rejects with ('resolved' when it does not). */
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : `foreign: ${String(err)}`
  }
}

/** A backend that counts its appends (the recorder's durable points). */
function counting(inner: SessionPersistence = createMemoryPersistence()) {
  const counts = { appends: 0 }
  const persistence = delegate(inner)
  persistence.append = (id, events) => {
    counts.appends++
    return inner.append(id, events)
  }
  return { persistence, counts }
}

/** A backend whose methods are `inner`'s, bound, and can be replaced one by one. */

const addTool = () =>
  tool({
    inputSchema: jsonSchema<{ a: number; b: number }>({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }),
    execute: async ({ a, b }) => ({ sum: a + b }),
  })

const script = [
  { text: 'Adding twice.', calls: [{ id: 'c1', name: 'add', input: { a: 1, b: 2 } }, { id: 'c2', name: 'add', input: { a: 3, b: 4 } }] },
  { reasoning: 'one more', calls: [{ id: 'c3', name: 'add', input: { a: 5, b: 6 } }] },
  { text: 'The sums are 3, 7 and 11.' },
]

/** A tool message as the log gives it back: one message per result, JSON outputs as their text. */
function splitTool(m: ModelMessage): ModelMessage[] {
  if (m.role !== 'tool') return [m]
  return m.content.map((p) => ({
    role: 'tool' as const,
    content: [p.type === 'tool-result' && p.output.type === 'json' ? { ...p, output: { type: 'text' as const, value: JSON.stringify(p.output.value) } } : p],
  }))
}

const types = (events: readonly SessionEvent[]) => events.map((e) => e.type)

for (const mode of ['generateText', 'streamText'] as const) {
  describe(`the recorder in ${mode}`, () => {
    const run = async (settings: Parameters<typeof generateText>[0]) => {
      if (mode === 'generateText') return (await generateText(settings)).response.messages
      const result = streamText(settings as Parameters<typeof streamText>[0])
      await result.consumeStream()
      return (await result.response).messages
    }

    it('records the turn as it happens, with one append per step plus one per tool call', async () => {
      const { persistence, counts } = counting()
      const session = await openAiSdkSession({ persistence, sessionId: 's1', now: () => 1000 })
      const { model } = scriptedModel(script)
      const turn = session.turn('Add 1+2, 3+4 and 5+6.')
      const messages = await run({ model, tools: { add: addTool() }, stopWhen: stepCountIs(10), ...turn.settings })
      await turn.done

      expect(counts.appends).toBe(3 + 3) // three steps, three tool calls
      expect(types(session.events)).toEqual([
        'turn/start', 'user/message', 'step/start', 'tool/call', 'tool/call',
        'assistant/message', 'tool/result', 'tool/result', 'step/end', 'step/start', 'tool/call',
        'assistant/message', 'tool/result', 'step/end', 'step/start',
        'assistant/message', 'step/end', 'turn/end',
      ])
      expect(session.events.map((e) => e.seq)).toEqual(session.events.map((_, i) => i))
      expect(session.events.at(-1)?.data).toEqual({ turn: 1, reason: { kind: 'completed', finishReason: 'stop' } })
      const call = session.events.find((e) => e.type === 'tool/call')
      expect(call?.data).toEqual({ turn: 1, step: 0, callId: 'c1', name: 'add', arguments: { a: 1, b: 2 } })
      const result = session.events.find((e) => e.type === 'tool/result')
      expect(result?.data).toEqual({ turn: 1, step: 0, callId: 'c1', name: 'add', content: [{ type: 'text', text: '{"sum":3}' }] })
      // The stored log is what the backend returns, and is balanced for repair and history.
      expect((await persistence.inspect('s1')).events).toEqual(session.events)
      expect(computeClosers(session.events, 0)).toEqual([])
      expect(toModelHistory(session.events).messages.filter((m) => m.role === 'tool')).toHaveLength(3)
      // The history given back is the run's messages (a JSON output comes back as its text).
      const expected: ModelMessage[] = [{ role: 'user', content: 'Add 1+2, 3+4 and 5+6.' }, ...messages.flatMap(splitTool)]
      expect(session.messages).toEqual(expected)
    })

    it('with durableInput, makes the input durable before the model is called (one more append); without, with the first tool call', async () => {
      for (const durableInput of [true, false]) {
        const { persistence, counts } = counting()
        const id = `durable-input-${durableInput}`
        const session = await openAiSdkSession({ persistence, sessionId: id })
        const { model } = scriptedModel(script)
        const stored: string[][] = []
        const inner = model.doGenerate
        const innerStream = model.doStream
        const peek = async () => {
          const log = await persistence.inspect(id).catch(() => ({ events: [], repair: undefined })) // nothing stored yet
          stored.push(log.events.slice(0, log.events.length - (log.repair?.closers.length ?? 0)).map((e) => e.type))
        }
        model.doGenerate = async (o) => (stored.length === 0 && (await peek()), inner(o))
        model.doStream = async (o) => (stored.length === 0 && (await peek()), innerStream(o))
        const turn = session.turn('Add', { durableInput })
        await run({ model, tools: { add: addTool() }, stopWhen: stepCountIs(10), ...turn.settings })
        await turn.done
        expect(stored[0]).toEqual(durableInput ? ['turn/start', 'user/message', 'step/start'] : [])
        expect(counts.appends).toBe(3 + 3 + (durableInput ? 1 : 0))
      }
    })

    it('hands the next turn the whole history, and numbers turns on', async () => {
      const { persistence } = counting()
      const session = await openAiSdkSession({ persistence, sessionId: 's2' })
      const first = scriptedModel([{ text: 'Hello.' }])
      const t1 = session.turn('Hi')
      await run({ model: first.model, ...t1.settings })
      await t1.done
      const second = scriptedModel([{ text: 'Still here.' }])
      const t2 = session.turn({ role: 'user', content: [{ type: 'text', text: 'Again' }] })
      await run({ model: second.model, ...t2.settings })
      await t2.done
      expect(t2.number).toBe(2)
      expect(second.prompts[0]).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'Hi' }], providerOptions: undefined },
        { role: 'assistant', content: [{ type: 'text', text: 'Hello.', providerOptions: undefined }], providerOptions: undefined },
        { role: 'user', content: [{ type: 'text', text: 'Again', providerOptions: undefined }], providerOptions: undefined },
      ])
      await session.close()
      const resumed = await openAiSdkSession({ persistence, sessionId: 's2' })
      expect(resumed.events).toEqual(session.events)
      expect(resumed.turn('third').number).toBe(3)
    })
  })
}

describe('the recorder around failures and misuse', () => {
  it('ends a turn whose run threw with reason error, closing its open step', async () => {
    const { persistence } = counting()
    const session = await openAiSdkSession({ persistence, sessionId: 'f1' })
    const { model } = scriptedModel([])
    model.doGenerate = async () => {
      throw new Error('provider down')
    }
    const turn = session.turn('Hi')
    await expect(generateText({ model, maxRetries: 0, ...turn.settings })).rejects.toThrow()
    await turn.fail(new Error('provider down'))
    expect(types(session.events)).toEqual(['turn/start', 'user/message', 'step/start', 'step/end', 'turn/end'])
    expect(session.events.at(-1)?.data).toEqual({ turn: 1, reason: { kind: 'error', message: 'provider down' } })
  })

  it('refuses a second turn while one is open, and any turn after close', async () => {
    const session = await openAiSdkSession({ persistence: createMemoryPersistence(), sessionId: 'm1' })
    const turn = session.turn('one')
    expect(await codeOf(Promise.resolve().then(() => session.turn('two')))).toBe('E_SESSION_LIVE')
    await turn.end()
    expect(session.turn('two').number).toBe(2)
    await session[Symbol.asyncDispose]()
    await session.close() // idempotent
    expect(await codeOf(Promise.resolve().then(() => session.turn('three')))).toBe('E_DISPOSED')
    // close ended the open turn as aborted
    expect(session.events.at(-1)?.data).toEqual({ turn: 2, reason: { kind: 'aborted' } })
  })

  it('refuses bad options and bad input with stable codes', async () => {
    const persistence = createMemoryPersistence()
    expect(await codeOf(openAiSdkSession({ persistence: {} as SessionPersistence, sessionId: 'x' }))).toBe('E_CONFIG')
    expect(await codeOf(openAiSdkSession({ persistence, sessionId: '' }))).toBe('E_CONFIG')
    expect(await codeOf(openAiSdkSession({ persistence, sessionId: 'x', meta: { bad: 1n as never } }))).toBe('E_CONFIG')
    expect(await codeOf(openAiSdkSession({ persistence, sessionId: 'x', meta: { type: 'no' } }))).toBe('E_INVALID_META')
    const session = await openAiSdkSession({ persistence, sessionId: 'y' })
    for (const bad of [{ role: 'robot', content: 'x' }, { role: 'user', content: 42 }, { role: 'tool', content: 'x' }, [{ role: 'user', content: [{ text: 'no type' }] }], null, 7]) {
      expect(await codeOf(Promise.resolve().then(() => session.turn(bad as never)))).toBe('E_INVALID_EVENT')
    }
    for (const bad of [null, 'durable', { durableInput: 'yes' }, { durable: true }]) {
      expect(await codeOf(Promise.resolve().then(() => session.turn('x', bad as never)))).toBe('E_CONFIG')
    }
    expect(session.currentTurn).toBeUndefined()
    expect(await codeOf(openAiSdkSession({ persistence, sessionId: 'z', cwd: 'relative/dir' }).then((s) => s.turn('x').end()))).toBe('E_INVALID_META')
  })

  it('reports a failed append on done, and refuses further turns with that error', async () => {
    const persistence = delegate(createMemoryPersistence())
    persistence.append = async () => {
      throw new SessionPersistenceError('E_IO', 'disk full')
    }
    const session = await openAiSdkSession({ persistence, sessionId: 'io' })
    const { model } = scriptedModel(script)
    const turn = session.turn('Add')
    await generateText({ model, tools: { add: addTool() }, stopWhen: stepCountIs(10), ...turn.settings })
    expect(await codeOf(turn.done)).toBe('E_IO')
    expect(session.events).toEqual([])
    expect(await codeOf(Promise.resolve().then(() => session.turn('again')))).toBe('E_IO')
  })

  it('guarded tools do not run when their call could not be recorded; unguarded ones do (the AI SDK ignores the failure)', async () => {
    for (const guard of [true, false]) {
      const persistence = delegate(createMemoryPersistence())
      persistence.append = async () => {
        throw new SessionPersistenceError('E_IO', 'disk full')
      }
      const session = await openAiSdkSession({ persistence, sessionId: `guard-${guard}` })
      let runs = 0
      const tools = { add: tool({ inputSchema: jsonSchema<{ a: number }>({ type: 'object' }), execute: async () => ++runs }) }
      const { model, prompts } = scriptedModel([{ calls: [{ id: 'g1', name: 'add', input: { a: 1 } }] }, { text: 'done' }])
      const turn = session.turn('Add')
      await generateText({ model, stopWhen: stepCountIs(5), ...turn.settings, tools: guard ? turn.guardTools(tools) : tools })
      expect(runs).toBe(guard ? 0 : 1)
      const result = prompts[1]?.find((m) => m.role === 'tool')?.content[0]
      expect(result).toMatchObject({ type: 'tool-result', toolCallId: 'g1', output: { type: guard ? 'error-text' : 'json' } })
      expect(await codeOf(turn.done)).toBe('E_IO')
    }
  })

  it('guarded tools run normally once their call is on record', async () => {
    const session = await openAiSdkSession({ persistence: createMemoryPersistence(), sessionId: 'guard-ok' })
    const { model } = scriptedModel(script)
    const turn = session.turn('Add')
    const result = await generateText({ model, stopWhen: stepCountIs(10), ...turn.settings, tools: turn.guardTools({ add: addTool() }) })
    await turn.done
    expect(result.steps.flatMap((s) => s.toolResults.map((r) => r.output))).toEqual([{ sum: 3 }, { sum: 7 }, { sum: 11 }])
  })

  it('ends the turn as aborted when a stream is aborted inside a tool', async () => {
    const session = await openAiSdkSession({ persistence: createMemoryPersistence(), sessionId: 'abort' })
    const controller = new AbortController()
    const tools = {
      wait: tool({
        inputSchema: jsonSchema<object>({ type: 'object' }),
        execute: async () => {
          controller.abort()
          return 'late'
        },
      }),
    }
    const { model } = scriptedModel([{ calls: [{ id: 'w1', name: 'wait', input: {} }] }, { text: 'never' }])
    const turn = session.turn('Wait')
    const result = streamText({ model, tools, stopWhen: stepCountIs(5), abortSignal: controller.signal, ...turn.settings })
    await result.consumeStream()
    await turn.done
    expect(types(session.events)).toEqual(['turn/start', 'user/message', 'step/start', 'tool/call', 'step/end', 'turn/end'])
    expect(session.events.at(-1)?.data).toEqual({ turn: 1, reason: { kind: 'aborted' } })
    expect(session.messages.at(-1)).toMatchObject({ role: 'tool', content: [{ toolCallId: 'w1', output: { type: 'error-text' } }] })
  })

  it('records a client-side tool result given as the next turn input, answering the open call', async () => {
    const session = await openAiSdkSession({ persistence: createMemoryPersistence(), sessionId: 'client' })
    const ask = tool({ inputSchema: jsonSchema<{ q: string }>({ type: 'object' }) }) // no execute: the app answers
    const first = scriptedModel([{ calls: [{ id: 'q1', name: 'ask', input: { q: 'color?' } }] }])
    const t1 = session.turn('Pick a color')
    await generateText({ model: first.model, tools: { ask }, ...t1.settings })
    await t1.done
    expect(session.messages.at(-1)).toMatchObject({ role: 'tool', content: [{ toolCallId: 'q1', output: { type: 'error-text' } }] })
    const second = scriptedModel([{ text: 'Blue it is.' }])
    const t2 = session.turn({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'q1', toolName: 'ask', output: { type: 'text', value: 'blue' } }] })
    await generateText({ model: second.model, tools: { ask }, ...t2.settings })
    await t2.done
    const results = second.prompts[0]!.filter((m) => m.role === 'tool').flatMap((m) => m.content)
    expect(results).toEqual([expect.objectContaining({ toolCallId: 'q1', output: { type: 'text', value: 'blue' } })])
    expect(types(session.events).filter((t) => t === 'tool/result')).toHaveLength(1)
  })

  it('a provider reusing a call id in a later turn (call_0 each time): the next turn sees both calls and results', async () => {
    const persistence = createMemoryPersistence()
    const session = await openAiSdkSession({ persistence, sessionId: 'reused-id' })
    const tools = { weather: tool({ inputSchema: jsonSchema<{ city: string }>({ type: 'object' }), execute: async ({ city }) => `sunny in ${city}` }) }
    for (const city of ['Paris', 'Rome']) {
      const { model } = scriptedModel([{ calls: [{ id: 'call_0', name: 'weather', input: { city } }] }, { text: `It is sunny in ${city}.` }])
      const t = session.turn(`weather in ${city}?`)
      await generateText({ model, tools: t.guardTools(tools), stopWhen: stepCountIs(3), ...t.settings })
      await t.done
    }
    const third = scriptedModel([{ text: 'ok' }])
    const t3 = session.turn('and now?')
    await generateText({ model: third.model, tools, ...t3.settings })
    await t3.done
    const prompt = third.prompts[0]!
    const parts = prompt.flatMap((m) => (Array.isArray(m.content) ? (m.content as { type: string; input?: unknown; output?: unknown }[]) : []))
    const calls = parts.filter((p) => p.type === 'tool-call')
    const results = parts.filter((p) => p.type === 'tool-result')
    expect(calls.map((c) => c.input)).toEqual([{ city: 'Paris' }, { city: 'Rome' }])
    expect(results.map((r) => r.output)).toEqual([
      { type: 'text', value: 'sunny in Paris' },
      { type: 'text', value: 'sunny in Rome' },
    ])
    // No assistant message is left empty.
    expect(prompt.filter((m) => m.role === 'assistant' && Array.isArray(m.content) && m.content.length === 0)).toEqual([])
    await session.close()
  })

  it('carries a tool approval across turns: the approved call runs in the next turn and is recorded once', async () => {
    const persistence = createMemoryPersistence()
    const session = await openAiSdkSession({ persistence, sessionId: 'approval' })
    let runs = 0
    const tools = {
      deploy: tool({ inputSchema: jsonSchema<{ env: string }>({ type: 'object' }), needsApproval: true, execute: async () => `deployed #${++runs}` }),
    }
    const first = scriptedModel([{ calls: [{ id: 'd1', name: 'deploy', input: { env: 'prod' } }] }])
    const t1 = session.turn('Deploy')
    const r1 = await generateText({ model: first.model, tools, stopWhen: stepCountIs(5), ...t1.settings })
    await t1.done
    const request = r1.content.find((p) => p.type === 'tool-approval-request')
    expect(request).toBeDefined()
    expect(runs).toBe(0)

    // The session ends with the call waiting: as history on its own it is answered (balanced)…
    expect(session.messages.at(-1)).toMatchObject({ role: 'tool', content: [{ toolCallId: 'd1', output: { type: 'error-text' } }] })
    // …but an approval given as the next input lets the AI SDK run it.
    const second = scriptedModel([{ text: 'Deployed.' }])
    const t2 = session.turn({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: true }] })
    const r2 = await generateText({ model: second.model, tools, stopWhen: stepCountIs(5), ...t2.settings })
    await t2.done
    expect(runs).toBe(1)
    expect(r2.text).toBe('Deployed.')
    const seen = second.prompts[0]!.filter((m) => m.role === 'tool').flatMap((m) => m.content)
    expect(seen).toContainEqual(expect.objectContaining({ type: 'tool-result', toolCallId: 'd1', output: { type: 'text', value: 'deployed #1' } }))
    const resultsOf = (id: string) => session.events.filter((e) => e.type === 'tool/result' && (e.data as { callId: string }).callId === id)
    expect(resultsOf('d1')).toHaveLength(1)
    expect(session.events.filter((e) => e.type === 'tool/call')).toHaveLength(1)
    expect(computeClosers(session.events, 0)).toEqual([])
    expect(session.messages.filter((m) => m.role === 'tool' && m.content.some((p) => p.type === 'tool-result' && p.output.type === 'error-text'))).toEqual([])
  })

  it('gives a second instance over the same root E_LOCKED while the first writes', async () => {
    const root = await tmpRoot()
    const a = createJsonlPersistence({ root, sync: 'none' })
    const b = createJsonlPersistence({ root, sync: 'none' })
    const first = await openAiSdkSession({ persistence: a, sessionId: 'shared' })
    const seen: string[] = []
    const tools = {
      add: tool({
        inputSchema: jsonSchema<{ a: number; b: number }>({ type: 'object' }),
        execute: async ({ a: x, b: y }) => {
          const other = createJsonlPersistence({ root, sync: 'none' }) // another instance, mid-run, inside a tool
          seen.push(await codeOf(openAiSdkSession({ persistence: other, sessionId: 'shared' })))
          return x + y
        },
      }),
    }
    const { model } = scriptedModel(script)
    const turn = first.turn('Add')
    await generateText({ model, tools, stopWhen: stepCountIs(10), ...turn.settings })
    await turn.done
    expect(seen).toEqual(['E_LOCKED', 'E_LOCKED', 'E_LOCKED'])
    expect(await codeOf(openAiSdkSession({ persistence: b, sessionId: 'shared' }))).toBe('E_LOCKED')
    await first.close()
    const second = await openAiSdkSession({ persistence: b, sessionId: 'shared' })
    expect(second.events).toEqual(first.events)
    await second.close()
    await a.closeAll()
    await b.closeAll()
  })
})
