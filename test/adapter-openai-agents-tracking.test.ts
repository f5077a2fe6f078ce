// trackToolCalls: each call is durable before its tool runs, a tool whose call could not be
// recorded never runs, undo restores the tools, and what the run adds comes back deep-equal.
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Agent, type AgentInputItem, MemorySession, run, tool } from '@openai/agents'
import { assistantMessage, functionCall, modelError, ScriptedModel } from '@openai/agents-core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, PROVISIONAL_FIELD, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import type { SessionEvent } from '../src/session/schema.js'
import { toModelHistory } from '../src/session/history.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'
const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

/** A JsonlSession whose addItems calls are recorded, to compare with what getItems returns. */
function spied(session: JsonlSession): AgentInputItem[] {
  const added: AgentInputItem[] = []
  const addItems = session.addItems.bind(session)
  session.addItems = async (items) => {
    added.push(...structuredClone(items))
    await addItems(items)
  }
  return added
}

const calls = (events: readonly SessionEvent[]) =>
  events.flatMap((e) =>
    e.type === 'assistant/message'
      ? ((e.data as { content: { type: string; callId?: string }[] }).content ?? []).filter((b) => b.type === 'tool-call')
      : [],
  )

describe('trackToolCalls', () => {
  it('makes each call durable before its tool runs (seen from another reader of the log)', async () => {
    const root = await mkdtemp(join(tmpdir(), 'spj-oa-track-'))
    roots.push(root)
    const reader = createJsonlPersistence({ root })
    const seenInTool: string[][] = []
    const probe = tool({
      name: 'probe',
      description: 'probe',
      parameters: z.object({ n: z.number() }),
      execute: async ({ n }) => {
        const { events } = await reader.inspect('durable')
        seenInTool.push(calls(events).map((c) => c.callId!))
        return `n=${n}`
      },
    })
    const model = new ScriptedModel([
      [functionCall('probe', { n: 1 }, { callId: 'p1' })],
      [functionCall('probe', { n: 2 }, { callId: 'p2' })],
      [assistantMessage('done')],
    ])
    const agent = new Agent({ name: 'A', instructions: 'probe', model, tools: [probe] })
    const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 'durable' })
    const added = spied(session)
    trackToolCalls(agent, session)
    const result = await run(agent, 'go', { session })
    expect(result.finalOutput).toBe('done')
    expect(seenInTool).toEqual([['p1'], ['p1', 'p2']])
    expect(await session.getItems()).toEqual(added)
    await session.close()
  })

  it('runs parallel calls of one response in one step, and a streamed run comes back deep-equal', async () => {
    const persistence = createMemoryPersistence()
    const add = tool({
      name: 'add',
      description: 'add',
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => String(a + b),
    })
    const model = new ScriptedModel([
      [assistantMessage('both at once'), functionCall('add', { a: 1, b: 2 }, { callId: 'x1' }), functionCall('add', { a: 3, b: 4 }, { callId: 'x2' })],
      [assistantMessage('3 and 7')],
    ])
    const agent = new Agent({ name: 'A', instructions: 'add', model, tools: [add] })
    const session = new JsonlSession({ persistence, sessionId: 'parallel' })
    const added = spied(session)
    trackToolCalls(agent, session)
    const streamed = await run(agent, 'add twice', { session, stream: true })
    for await (const _event of streamed) {
      // drain
    }
    await streamed.completed
    expect(streamed.finalOutput).toBe('3 and 7')
    expect(await session.getItems()).toEqual(added)
    await session.close()
    const { events } = await persistence.inspect('parallel')
    const steps = events.filter((e) => e.type === 'step/start').map((e) => (e.data as { step: number }).step)
    expect(steps).toEqual([1, 2])
    const callSteps = events
      .filter((e) => e.type === 'assistant/message' && calls([e]).length > 0)
      .map((e) => (e.data as { step: number }).step)
    expect(callSteps).toEqual([1, 1])
    expect(calls(events).map((c) => c.callId)).toEqual(['x1', 'x2'])
  })

  it('never runs a tool whose call could not be recorded', async () => {
    const memory = createMemoryPersistence()
    let failAppends = false
    const failing: SessionPersistence = {
      locate: (meta) => memory.locate(meta),
      create: (meta) => memory.create(meta),
      load: (id, options) => memory.load(id, options),
      inspect: (id) => memory.inspect(id),
      list: (options) => memory.list(options),
      read: (id, range) => memory.read(id, range),
      watch: (id, options) => memory.watch(id, options),
      delete: (id) => memory.delete(id),
      close: (id) => memory.close(id),
      append: (id, events) =>
        failAppends ? Promise.reject(new SessionPersistenceError('E_IO', 'disk gone', { sessionId: id })) : memory.append(id, events),
    }
    let ran = 0
    const risky = tool({ name: 'risky', description: 'risky', parameters: z.object({}), execute: async () => String(++ran) })
    const model = new ScriptedModel([[functionCall('risky', {}, { callId: 'r1' })], [assistantMessage('after')]])
    const agent = new Agent({ name: 'A', instructions: 'risky', model, tools: [risky] })
    const session = new JsonlSession({ persistence: failing, sessionId: 'fails' })
    await session.getItems()
    trackToolCalls(agent, session)
    failAppends = true
    const outcome = await run(agent, 'go', { session }).then(
      (r) => ({ output: r.finalOutput as unknown }),
      (err: unknown) => ({ error: err }),
    )
    expect(ran).toBe(0)
    // The run fails (the SDK wraps the error in a ToolCallError) with the backend's error inside.
    expect('error' in outcome).toBe(true)
    const chain: unknown[] = []
    let e: unknown = (outcome as { error?: unknown }).error
    while (e && chain.length < 5) {
      chain.push(e)
      const o = e as { error?: unknown; cause?: unknown }
      e = o.error ?? o.cause
    }
    expect(chain.some((e) => isSessionPersistenceError(e, 'E_IO'))).toBe(true)
  })

  it('a run that fails after a tool keeps what it recorded; close ends its turn as aborted', async () => {
    const persistence = createMemoryPersistence()
    const echo = tool({ name: 'echo', description: 'echo', parameters: z.object({ s: z.string() }), execute: async ({ s }) => s })
    const model = new ScriptedModel([[functionCall('echo', { s: 'hi' }, { callId: 'f1' })], modelError(new Error('model down'))])
    const agent = new Agent({ name: 'A', instructions: 'echo', model, tools: [echo] })
    const session = new JsonlSession({ persistence, sessionId: 'failed' })
    trackToolCalls(agent, session)
    await expect(run(agent, 'say hi', { session })).rejects.toThrow()
    await session.close()
    const { events } = await persistence.inspect('failed')
    expect(events.filter((e) => e.type === 'turn/end').map((e) => e.data)).toEqual([{ turn: 1, reason: { kind: 'aborted' } }])
    const reopened = new JsonlSession({ persistence, sessionId: 'failed' })
    expect(await reopened.getItems()).toEqual([
      { type: 'message', role: 'user', content: 'say hi' },
      { type: 'function_call', name: 'echo', callId: 'f1', status: 'completed', arguments: '{"s":"hi"}' },
      { type: 'function_call_result', name: 'echo', callId: 'f1', status: 'completed', output: { type: 'text', text: 'hi' } },
    ])
    await reopened.close()
  })

  it('the run after a failed one ends its leftover turn first: its input is on record before its tool runs, in run order', async () => {
    for (const failure of ['tool throws', 'model errors'] as const) {
      const persistence = createMemoryPersistence()
      const id = failure === 'tool throws' ? 'after-tool-failure' : 'after-model-failure'
      let second = false
      const seenInTool: string[] = []
      const t = tool({
        name: 't',
        description: 't',
        parameters: z.object({ n: z.number() }),
        errorFunction: null,
        execute: async ({ n }) => {
          if (second) {
            // What another reader sees while the second run's tool runs.
            const { events } = await persistence.inspect(id)
            seenInTool.push(...events.map((e) => (e.type === 'user/message' ? `user:${JSON.stringify(e.data).includes('second') ? 'second' : 'first'}` : e.type)))
          } else if (failure === 'tool throws') throw new Error('boom')
          return `n=${n}`
        },
      })
      const model = new ScriptedModel(
        failure === 'tool throws'
          ? [[functionCall('t', { n: 1 }, { callId: 'a1' })], [functionCall('t', { n: 2 }, { callId: 'b1' })], [assistantMessage('done')]]
          : [[functionCall('t', { n: 1 }, { callId: 'a1' })], modelError(new Error('429')), [functionCall('t', { n: 2 }, { callId: 'b1' })], [assistantMessage('done')]],
      )
      const agent = new Agent({ name: 'A', instructions: 't', model, tools: [t] })
      const session = new JsonlSession({ persistence, sessionId: id })
      trackToolCalls(agent, session)
      await expect(run(agent, 'first', { session })).rejects.toThrow()
      second = true
      expect((await run(agent, 'second', { session })).finalOutput).toBe('done')
      await session.close()
      // In the tool of the second run: the first turn ended, the second opened with its input.
      // (inspect adds the closers of the open turn after what is written)
      const at = seenInTool.indexOf('user:second')
      expect(at).toBeGreaterThan(0)
      expect(seenInTool.slice(at - 2, at + 3)).toEqual(['turn/end', 'turn/start', 'user:second', 'step/start', 'assistant/message'])
      const { events } = await persistence.inspect(id)
      const turns = events.filter((e) => e.type === 'turn/start' || e.type === 'turn/end').map((e) => [e.type, e.data])
      expect(turns).toEqual([
        ['turn/start', { turn: 1 }],
        ['turn/end', { turn: 1, reason: { kind: 'aborted' } }],
        ['turn/start', { turn: 2 }],
        ['turn/end', { turn: 2, reason: { kind: 'completed' } }],
      ])
      // Each run's input and calls are in its own turn, in the order the runs ran.
      const secondInput = events.findIndex((e) => e.type === 'user/message' && JSON.stringify(e.data).includes('second'))
      expect(secondInput).toBeGreaterThan(events.findIndex((e) => e.type === 'turn/end'))
      expect(calls(events.slice(0, secondInput)).map((c) => c.callId)).toEqual(['a1'])
      expect(calls(events.slice(secondInput)).map((c) => c.callId)).toEqual(['b1'])
      expect((await new JsonlSession({ persistence, sessionId: id }).getItems()).map((i) => ('callId' in i ? i.callId : 'content' in i ? i.content : i.type))).toEqual(
        failure === 'tool throws'
          ? ['first', 'a1', 'second', 'b1', 'b1', [{ type: 'output_text', text: 'done' }]]
          : ['first', 'a1', 'a1', 'second', 'b1', 'b1', [{ type: 'output_text', text: 'done' }]],
      )
    }
  })

  /**
   * A session on a fresh root, the items `before` added to it and its last one popped, then a
   * tracked run whose model calls `weather` for Paris under `call_0`. Inside the tool, `see` is
   * told the log as another instance reads it then. Returns what it saw and the log's history after.
   */
  async function popThenParis(id: string, before: AgentInputItem[], see: (events: readonly SessionEvent[]) => string) {
    const root = await mkdtemp(join(tmpdir(), 'spj-oa-pop-'))
    roots.push(root)
    const reader = createJsonlPersistence({ root })
    const seenInTool: string[] = []
    const weather = tool({
      name: 'weather',
      description: 'weather',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        seenInTool.push(see((await reader.inspect(id)).events))
        return `sunny in ${city}`
      },
    })
    const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: id })
    await session.addItems(before)
    const popped = await session.popItem()
    const agent = new Agent({
      name: 'A',
      instructions: 'x',
      model: new ScriptedModel([[functionCall('weather', { city: 'Paris' }, { callId: 'call_0' })], [assistantMessage('Paris ok')]]),
      tools: [weather],
    })
    trackToolCalls(agent, session)
    expect((await run(agent, 'Paris?', { session })).finalOutput).toBe('Paris ok')
    await session.close()
    return { popped, seenInTool, history: toModelHistory((await reader.inspect(id)).events as SessionEvent[]).messages }
  }
  const oslo = { type: 'function_call', callId: 'call_0', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' } as const

  it('a call popped from the session, then made again under its id by the next run, is on record before its tool runs', async () => {
    // What a resume after a kill in the tool would give the model: the history view of the log.
    const roles = (events: readonly SessionEvent[]) =>
      toModelHistory(events).messages.map((m) => (m.role === 'tool' ? `tool:${m.callId}${m.synthetic ? ' (synthetic)' : ''}` : m.role)).join(',')
    // A call left open (an approval the user then withdrew), taken out of the session.
    const { popped, seenInTool, history } = await popThenParis('pop-then-call', [{ type: 'message', role: 'user', content: 'Oslo?' }, oslo], roles)
    expect(popped).toEqual(oslo)
    // In the tool, the new call was on record: a resume (inspect closes the turn as a load would) answers it, never loses it.
    expect(seenInTool).toEqual(['user,user,assistant,tool:call_0'])
    expect(history.map((m) => (m.role === 'tool' ? `tool:${m.callId}${m.synthetic ? ' (synthetic)' : ''}` : m.role))).toEqual(['user', 'user', 'assistant', 'tool:call_0', 'assistant'])
  })

  it('after a popped result reopens its call, a new call reusing the id (other arguments) is recorded as a call of its own', async () => {
    const callsSeen = (events: readonly SessionEvent[]) => calls(events).map((c) => `${c.callId}:${Object.values((c as { arguments?: object }).arguments ?? {}).join()}`).join(',')
    const { popped, seenInTool, history } = await popThenParis(
      'pop-result',
      [
        { type: 'message', role: 'user', content: 'Oslo?' },
        oslo,
        { type: 'function_call_result', callId: 'call_0', name: 'weather', status: 'completed', output: { type: 'text', text: 'rainy' } },
      ],
      callsSeen,
    )
    expect(popped?.type).toBe('function_call_result')
    // Inside the tool the Paris call was on record (a kill there keeps it).
    expect(seenInTool).toEqual(['call_0:Oslo,call_0:Paris'])
    const shape = history.map((m) => (m.role === 'tool' ? `tool:${m.synthetic ? 'synthetic' : JSON.stringify(m.content)}` : m.role))
    // The Oslo call lost its result to the pop (answered synthetically); Paris has its own.
    expect(shape).toEqual(['user', 'assistant', 'tool:synthetic', 'user', 'assistant', `tool:${JSON.stringify([{ type: 'text', text: 'sunny in Paris' }])}`, 'assistant'])
  })

  it('a call id the model reuses in a later run (call_0 each time) is a new call: on record before its tool runs, stored once', async () => {
    const root = await mkdtemp(join(tmpdir(), 'spj-oa-reuse-'))
    roots.push(root)
    // Another persistence instance reading the same log while the tools run.
    const reader = createJsonlPersistence({ root })
    const seenInTool: string[] = []
    const cityCalls = (events: readonly SessionEvent[]) =>
      calls(events).map((c) => `${c.callId}:${Object.values((c as { arguments?: object }).arguments ?? {}).join()}`)
    const weather = tool({
      name: 'weather',
      description: 'weather',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        const { events } = await reader.inspect('reuse')
        seenInTool.push(`${city} sees ${cityCalls(events).join(',')}`)
        return `sunny in ${city}`
      },
    })
    const clock = tool({
      name: 'clock',
      description: 'clock',
      parameters: z.object({ zone: z.string() }),
      execute: async ({ zone }) => {
        const { events } = await reader.inspect('reuse')
        seenInTool.push(`${zone} sees ${cityCalls(events).join(',')}`)
        return `noon in ${zone}`
      },
    })
    const model = new ScriptedModel([
      [functionCall('weather', { city: 'Paris' }, { callId: 'call_0' })],
      [assistantMessage('Paris ok')],
      [functionCall('clock', { zone: 'Rome' }, { callId: 'call_0' })],
      [assistantMessage('Rome ok')],
    ])
    const agent = new Agent({ name: 'A', instructions: 'x', model, tools: [weather, clock] })
    // What the SDK's own in-memory session holds after the same two runs.
    const memoryModel = new ScriptedModel([
      [functionCall('weather', { city: 'Paris' }, { callId: 'call_0' })],
      [assistantMessage('Paris ok')],
      [functionCall('clock', { zone: 'Rome' }, { callId: 'call_0' })],
      [assistantMessage('Rome ok')],
    ])
    const memoryAgent = new Agent({ name: 'A', instructions: 'x', model: memoryModel, tools: [weather, clock] })
    const sdkSession = new MemorySession()
    const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 'reuse' })
    trackToolCalls(agent, session)
    expect((await run(agent, 'Paris?', { session })).finalOutput).toBe('Paris ok')
    expect((await run(agent, 'Rome?', { session })).finalOutput).toBe('Rome ok')
    // Inside each tool, its own call (this id, these arguments) was already on record.
    expect(seenInTool).toEqual(['Paris sees call_0:Paris', 'Rome sees call_0:Paris,call_0:Rome'])
    const items = await session.getItems()
    await session.close()
    seenInTool.length = 0
    await run(memoryAgent, 'Paris?', { session: sdkSession })
    await run(memoryAgent, 'Rome?', { session: sdkSession })
    const sdkItems = await sdkSession.getItems()
    expect(items).toEqual(sdkItems)
    expect(items.map((i) => i.type === 'message' ? i.role : i.type)).toEqual([
      'user', 'function_call', 'function_call_result', 'assistant', 'user', 'function_call', 'function_call_result', 'assistant',
    ])
    // Stored once each: two calls and two results in the vocabulary, as a new reader sees them.
    const { events } = await reader.inspect('reuse')
    expect(calls(events).map((c) => (c as { name?: string }).name)).toEqual(['weather', 'clock'])
    const results = events.filter((e) => e.type === 'tool/result').map((e) => JSON.stringify((e.data as { content: unknown }).content))
    expect(results).toEqual([JSON.stringify([{ type: 'text', text: 'sunny in Paris' }]), JSON.stringify([{ type: 'text', text: 'noon in Rome' }])])
    expect(events.filter((e) => e.type === 'user/message')).toHaveLength(2)
    // The package's own reader answers each call with its own result, nothing synthetic.
    const history = toModelHistory(events as SessionEvent[])
    expect(history.messages.filter((m) => m.role === 'tool').map((m) => m.callId)).toEqual(['call_0', 'call_0'])
    expect(history.messages.some((m) => m.synthetic)).toBe(false)
    expect(await new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 'reuse' }).getItems()).toEqual(sdkItems)
  })

  it('a tool shared by two tracked agents is recorded only in the session of the agent that called it', async () => {
    const persistence = createMemoryPersistence()
    const shared = tool({ name: 'shared', description: 'shared', parameters: z.object({}), execute: async () => 'ok' })
    const agentA = new Agent({ name: 'A', instructions: 'a', tools: [shared], model: new ScriptedModel([[functionCall('shared', {}, { callId: 'a1' })], [assistantMessage('a done')]]) })
    const agentB = new Agent({ name: 'B', instructions: 'b', tools: [shared], model: new ScriptedModel([[assistantMessage('b done')]]) })
    const sessionA = new JsonlSession({ persistence, sessionId: 'a' })
    const sessionB = new JsonlSession({ persistence, sessionId: 'b' })
    trackToolCalls(agentA, sessionA)
    trackToolCalls(agentB, sessionB)
    await sessionB.getItems()
    expect((await run(agentA, 'call it', { session: sessionA })).finalOutput).toBe('a done')
    await sessionA.close()
    await sessionB.close()
    expect(calls((await persistence.inspect('a')).events).map((c) => c.callId)).toEqual(['a1'])
    // Session B was opened but never written: the backend has no log for it.
    const b = await persistence.inspect('b').then(
      () => 'found',
      (err: unknown) => (isSessionPersistenceError(err) ? err.code : 'foreign'),
    )
    expect(b).toBe('E_NOT_FOUND')
  })

  it('undo restores the tools and stops recording ahead of the run', async () => {
    const persistence = createMemoryPersistence()
    const echo = tool({ name: 'echo', description: 'echo', parameters: z.object({ s: z.string() }), execute: async ({ s }) => s })
    const original = echo.invoke
    const model = new ScriptedModel([[functionCall('echo', { s: 'hi' }, { callId: 'e1' })], [assistantMessage('said hi')]])
    const agent = new Agent({ name: 'A', instructions: 'echo', model, tools: [echo] })
    const session = new JsonlSession({ persistence, sessionId: 'undo' })
    const untrack = trackToolCalls(agent, session)
    expect(echo.invoke).not.toBe(original)
    untrack()
    untrack()
    expect(echo.invoke).toBe(original)
    await run(agent, 'say hi', { session })
    await session.close()
    const { events } = await persistence.inspect('undo')
    expect(events.filter((e) => e[PROVISIONAL_FIELD] === true)).toEqual([])
    expect(calls(events).map((c) => c.callId)).toEqual(['e1'])
  })

  it('importing the main entry never loads @openai/agents', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spj-oa-import-'))
    roots.push(dir)
    const hooks = join(dir, 'hooks.mjs')
    await writeFile(
      hooks,
      `export async function resolve(specifier, context, next) {
        if (specifier.startsWith('@openai/')) throw new Error('LOADED ' + specifier)
        return next(specifier, context)
      }\n`,
    )
    const main = join(dir, 'main.mjs')
    await writeFile(
      main,
      `import { register } from 'node:module'
      import { pathToFileURL } from 'node:url'
      register(pathToFileURL(${JSON.stringify(hooks)}))
      const target = process.argv[2]
      try { await import(target); console.log('ok') } catch (e) { console.log(String(e.message).split('\\n')[0]) }\n`,
    )
    const cwd = fileURLToPath(new URL('..', import.meta.url))
    const exec = promisify(execFile)
    const entry = (name: string) => exec(process.execPath, [main, name], { cwd }).then((r) => r.stdout.trim())
    // The hook does refuse the SDK (so the check can fail)…
    expect(await entry('@openai/agents')).toBe('LOADED @openai/agents')
    // …and neither the adapter entry nor the main entry asks for it.
    expect(await entry(new URL('../dist/adapters/openai-agents/index.js', import.meta.url).href)).toBe('ok')
    expect(await entry(new URL('../dist/index.js', import.meta.url).href)).toBe('ok')
  })
})
