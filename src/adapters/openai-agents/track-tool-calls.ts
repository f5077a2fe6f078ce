import type { Agent, AgentInputItem, FunctionCallItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import { SessionPersistenceError } from '../../errors.js'
import { JsonlSession, RECORDER, type ToolCallRecorder } from './jsonl-session.js'

type Invoke = (runContext: unknown, input: string, details?: { toolCall?: FunctionCallItem }) => Promise<unknown>
interface InvokableTool {
  type: string
  invoke: Invoke
}

function isFunctionCall(v: unknown): v is FunctionCallItem {
  const o = asObject(v)
  return o?.type === 'function_call' && typeof o.callId === 'string' && typeof o.name === 'string'
}

/**
 * Makes every tool call of `agent` durable before the tool runs, in `session`. The Agents SDK
 * writes a session once, when the run ends, and its `agent_tool_start` hook does not wait for
 * an async listener; so each function tool's `invoke` is wrapped: it appends the call (and, for
 * the run's first call, the run's new input), waits until that is durable, runs the tool, and
 * records its result. A run killed in a tool therefore leaves the call on record; the next load
 * answers it with the crash text of `docs/contract.md §6.1`. What the run's final `addItems`
 * repeats is placed, not stored again.
 *
 * Wraps the function tools in `agent.tools` when called (not tools added later, not MCP tools,
 * not other agents reached by handoff: track those too). Returns a function that undoes it.
 */
export function trackToolCalls(agent: Agent<any, any>, session: JsonlSession): () => void {
  if (!(session instanceof JsonlSession)) {
    throw new SessionPersistenceError('E_CONFIG', 'trackToolCalls: session must be a JsonlSession')
  }
  const a = asObject(agent)
  if (!a || !Array.isArray(a.tools) || typeof a.on !== 'function' || typeof a.off !== 'function') {
    throw new SessionPersistenceError('E_CONFIG', 'trackToolCalls: agent must be an Agents SDK Agent')
  }
  const recorder = session[RECORDER]
  let active = true
  // A tool object may be shared by several agents: only calls this agent starts are recorded
  // here. Its `agent_tool_start` event comes, synchronously, before the tool's invoke.
  const claimed = new Set<string>()
  const undos: (() => void)[] = []
  for (const t of a.tools as unknown[]) {
    const tool = asObject(t) as InvokableTool | undefined
    if (tool?.type !== 'function' || typeof tool.invoke !== 'function') continue
    const original = tool.invoke
    const wrapped: Invoke = (runContext, input, details) =>
      active && isFunctionCall(details?.toolCall) && claimed.delete(details.toolCall.callId)
        ? invokeRecorded(recorder, details.toolCall, runContext, () => original.call(tool, runContext, input, details))
        : original.call(tool, runContext, input, details)
    tool.invoke = wrapped
    undos.push(() => {
      // Another wrapper may have been put on top since: then ours stays, passing calls through.
      if (tool.invoke === wrapped) tool.invoke = original
    })
  }
  // The run context tells runs apart: a run that failed never handed its items over, and the
  // next run's start (or its first call) ends the turn it left open before writing its own.
  const onStart = (context: unknown, _agent: unknown, turnInput?: AgentInputItem[]) => {
    if (active && Array.isArray(turnInput)) recorder.stageInput(turnInput, context)
  }
  const onToolStart = (_context: unknown, _tool: unknown, details?: { toolCall?: unknown }) => {
    if (active && isFunctionCall(details?.toolCall)) claimed.add(details.toolCall.callId)
  }
  type Listener = (...args: never[]) => void
  const emitter = agent as unknown as { on: (e: string, l: Listener) => void; off: (e: string, l: Listener) => void }
  emitter.on('agent_start', onStart)
  emitter.on('agent_tool_start', onToolStart)
  return () => {
    if (!active) return
    active = false
    claimed.clear()
    emitter.off('agent_start', onStart)
    emitter.off('agent_tool_start', onToolStart)
    for (const undo of undos) undo()
  }
}

async function invokeRecorded(recorder: ToolCallRecorder, call: FunctionCallItem, runContext: unknown, run: () => Promise<unknown>): Promise<unknown> {
  try {
    // The tool never runs unless its call is on record: a failed append fails the call.
    await recorder.recordCall(call, runContext)
    const output = await run()
    await recorder.recordResult(call, output, runContext)
    return output
  } finally {
    recorder.settled()
  }
}
