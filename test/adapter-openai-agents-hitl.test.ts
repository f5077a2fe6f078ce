// The Agents SDK's own file-session human-in-the-loop scenario, against JsonlSession: an
// approval-required tool interrupts a run; a later run, in a rehydrated session, resumes it from
// a serialized RunState and completes. Approvals, rejections and tool executions are counted.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, type AgentInputItem, run, RunState, tool } from '@openai/agents'
import { functionCall, ScriptedModel } from '@openai/agents-core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { toModelHistory } from '../src/session/history.js'
import type { SessionEvent } from '../src/session/schema.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'
const executed = new Map<string, number>()
const approvalTool = (name: string, prefix: string) =>
  tool({
    name,
    description: `${name} after approval`,
    parameters: z.object({ query: z.string() }),
    needsApproval: async () => true,
    execute: async ({ query }) => {
      executed.set(name, (executed.get(name) ?? 0) + 1)
      return `${prefix}:${query}`
    },
  })
const echo = approvalTool('approved_echo', 'approved')
const note = approvalTool('approved_note', 'approved_note')

interface Step {
  message: string
  toolName: string
  approve: boolean
}
const STEPS: Step[] = [
  { message: 'Fetch profile for customer 104.', toolName: 'approved_echo', approve: true },
  { message: 'Update note for customer 104.', toolName: 'approved_note', approve: true },
  { message: 'Delete note for customer 104.', toolName: 'approved_echo', approve: false },
]

const lastOf = <T extends AgentInputItem['type']>(items: AgentInputItem[], type: T) =>
  items.filter((i) => i.type === type).at(-1) as Extract<AgentInputItem, { type: T }> | undefined

describe('human-in-the-loop approvals through a JsonlSession (the SDK file-session scenario)', () => {
  let root: string
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'spj-oa-hitl-'))
  })
  afterAll(() => rm(root, { recursive: true, force: true }))

  // A local model server sends the same call id (`call_0`) in every response: each step's call
  // is a new one, and its approved invocation still records it once.
  it.each([
    { ids: 'distinct call ids', ID: 'hitl', callIdOf: (n: number) => `call_${n}` },
    { ids: 'one call id reused by every step', ID: 'hitl-reused', callIdOf: () => 'call_0' },
  ])('interrupts for approval, resumes from a serialized RunState in a rehydrated session, completes ($ids)', async ({ ID, callIdOf }) => {
    executed.clear()
    let n = 0
    for (const [i, step] of STEPS.entries()) {
      const callId = callIdOf(++n)
      const model = new ScriptedModel([[functionCall(step.toolName, { query: step.message }, { callId })]])
      const makeAgent = () =>
        new Agent({
          name: `scenario ${i}`,
          instructions: `Always call ${step.toolName}.`,
          model,
          tools: [echo, note],
          toolUseBehavior: 'stop_on_first_tool',
        })

      // The first run stops at the approval; its items are in the session.
      const agent = makeAgent()
      const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: ID })
      const untrack = trackToolCalls(agent, session)
      const first = await run(agent, step.message, { session })
      untrack()
      expect(first.interruptions).toHaveLength(1)
      const approval = first.interruptions[0]!
      expect(approval.rawItem).toMatchObject({ type: 'function_call', callId, name: step.toolName })
      if (step.approve) first.state.approve(approval)
      else first.state.reject(approval)
      const serialized = first.state.toString()
      await session.close()

      // A later run, in another session object over another backend instance, resumes it.
      const resumedAgent = makeAgent()
      const rehydrated = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: ID })
      const untrackResumed = trackToolCalls(resumedAgent, rehydrated)
      const state = await RunState.fromString(resumedAgent, serialized)
      const resumed = await run(resumedAgent, state, { session: rehydrated })
      untrackResumed()
      expect(resumed.interruptions).toHaveLength(0)
      const expected = step.approve ? `${step.toolName === 'approved_note' ? 'approved_note' : 'approved'}:${step.message}` : undefined
      if (expected) expect(resumed.finalOutput).toBe(expected)

      const items = await rehydrated.getItems()
      await rehydrated.close()
      // One user message, one call and one result per step so far, each once.
      expect(items.filter((x) => x.type === 'message' && x.role === 'user')).toHaveLength(i + 1)
      expect(items.filter((x) => x.type === 'function_call')).toHaveLength(i + 1)
      expect(items.filter((x) => x.type === 'function_call_result')).toHaveLength(i + 1)
      const lastUser = items.filter((x) => x.type === 'message' && x.role === 'user').at(-1)
      expect(lastUser).toMatchObject({ content: step.message })
      expect(lastOf(items, 'function_call')).toMatchObject({ callId, name: step.toolName })
      const result = lastOf(items, 'function_call_result')
      expect(result).toMatchObject({ callId, name: step.toolName })
      const text = (result?.output as { text?: string }).text
      if (expected) expect(text).toBe(expected)
      else expect(text).toBe(resumed.finalOutput)
    }
    // Approved tools ran once each; the rejected one never ran.
    expect(Object.fromEntries(executed)).toEqual({ approved_echo: 1, approved_note: 1 })

    // The log is balanced for the package's own readers: every call answered, none synthetic.
    const persistence = createJsonlPersistence({ root })
    const { events } = await persistence.inspect(ID)
    const history = toModelHistory(events as SessionEvent[])
    const expectedIds = [1, 2, 3].map(callIdOf)
    expect(history.messages.filter((m) => m.role === 'tool').map((m) => m.callId)).toEqual(expectedIds)
    expect(history.messages.some((m) => m.synthetic)).toBe(false)
    const callBlocks = history.messages
      .filter((m) => m.role === 'assistant')
      .flatMap((m) => (m.content as { type: string; callId?: string }[]).filter((b) => b.type === 'tool-call'))
    expect(callBlocks.map((b) => b.callId)).toEqual(expectedIds)
  })
})

describe('an approval resumed on the same JsonlSession object', () => {
  for (const serialize of [false, true]) {
    it(`stores the approved call's result once, in the turn its call opened (state ${serialize ? 'serialized and restored' : 'kept in memory'})`, async () => {
      const root = await mkdtemp(join(tmpdir(), 'spj-hitl-same-'))
      try {
        const model = new ScriptedModel([[functionCall('approved_echo', { query: 'x' }, { callId: 'call_0' })]])
        const agent = new Agent({ name: 'a', model, tools: [echo], toolUseBehavior: 'stop_on_first_tool' })
        const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 's' })
        trackToolCalls(agent, session)
        const first = await run(agent, 'hi', { session })
        first.state.approve(first.interruptions[0]!)
        const state = (serialize ? await RunState.fromString(agent, first.state.toString()) : first.state) as typeof first.state
        await run(agent, state, { session })
        const items = await session.getItems()
        await session.close()
        const { events } = await createJsonlPersistence({ root }).inspect('s')
        expect(items.filter((i) => i.type === 'function_call_result')).toHaveLength(1)
        expect(events.filter((e) => e.type === 'tool/result')).toHaveLength(1)
        expect(events.filter((e) => e.type === 'turn/end' && (e.data as { reason?: { kind?: string } }).reason?.kind === 'aborted')).toHaveLength(0)
      } finally {
        await rm(root, { recursive: true, force: true })
      }
    })
  }
})
