// A real Agents SDK loop in a child process, SIGKILLed inside a tool's execute; the parent
// resumes the session with a new JsonlSession and the next run completes.
import { execFile, fork } from 'node:child_process'
import { promisify } from 'node:util'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Agent, type AgentInputItem, run, tool } from '@openai/agents'
import { assistantMessage, ScriptedModel } from '@openai/agents-core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import { toModelHistory } from '../src/session/history.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'
const FIXTURE = fileURLToPath(new URL('./fixtures/openai-agents-crash.mjs', import.meta.url))
const ID = 'crashed-run'

/** Runs the fixture until its `hang` tool reports that it is executing, then SIGKILLs it. */
function runAndKillInTool(root: string): Promise<{ signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = fork(FIXTURE, [root, ID], {
      env: { ...process.env, OPENAI_AGENTS_DISABLE_TRACING: '1' },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    })
    let stderr = ''
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('message', (m: { inTool?: string; finished?: boolean }) => {
      if (m.inTool === 'hang') child.kill('SIGKILL')
      if (m.finished) reject(new Error('the run finished instead of hanging in its tool'))
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => resolve({ signal, stderr }))
  })
}

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))
const cli = async (...args: string[]) => (await promisify(execFile)(process.execPath, [CLI, ...args])).stdout
const verifyStatus = async (root: string) =>
  (JSON.parse(await cli('verify', '--root', root, '--json')) as { logs: { status: string }[] }).logs.map((l) => l.status)

const linesOf = async (path: string) =>
  (await readFile(path, 'utf8'))
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l) as { seq: number; type: string; data?: Record<string, unknown> })

const calls = (items: AgentInputItem[]) => items.filter((i) => i.type === 'function_call')
const results = (items: AgentInputItem[]) => items.filter((i) => i.type === 'function_call_result')

describe('an Agents SDK run SIGKILLed in a tool', () => {
  let root: string
  let path: string
  let before: Buffer

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'spj-oa-crash-'))
    const { signal, stderr } = await runAndKillInTool(root)
    expect(signal, stderr).toBe('SIGKILL')
    path = createJsonlPersistence({ root }).locate({ id: ID, createdAt: 0, delegationDepth: 0 }).path
    before = await readFile(path)
  })

  afterAll(() => rm(root, { recursive: true, force: true }))

  it('left the input and both calls on record, the completed result too, and an open turn', async () => {
    const events = await linesOf(path)
    expect(events.at(-1)?.type).not.toBe('turn/end')
    const toolCalls = events.flatMap((e) =>
      e.type === 'assistant/message' ? (e.data?.content as { type: string; callId?: string }[]) : [],
    )
    expect(toolCalls.map((b) => b.callId)).toEqual(['call_lookup', 'call_hang'])
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data?.callId)).toEqual(['call_lookup'])
    expect(events.filter((e) => e.type === 'user/message').map((e) => e.data?.content)).toEqual(['What is the weather?'])
    // The package's CLI reads it: repairable, the interrupted call marked.
    expect(await verifyStatus(root)).toEqual(['repairable'])
    expect(await cli('show', ID, '--root', root)).toContain('call_hang')
  })

  it('resumes: the interrupted call is answered with the crash text, and the next run completes', async () => {
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: ID })
    const items = await session.getItems()
    // The repair appended closers only: every byte written before the crash is unchanged.
    const after = await readFile(path)
    expect(after.subarray(0, before.length).equals(before)).toBe(true)
    expect(items).toEqual([
      { type: 'message', role: 'user', content: 'What is the weather?' },
      { type: 'function_call', name: 'lookup', callId: 'call_lookup', status: 'completed', arguments: '{"q":"weather"}' },
      { type: 'function_call_result', name: 'lookup', callId: 'call_lookup', status: 'completed', output: { type: 'text', text: 'found weather' } },
      { type: 'function_call', name: 'hang', callId: 'call_hang', status: 'completed', arguments: '{"seconds":60}' },
      { type: 'function_call_result', name: 'hang', callId: 'call_hang', status: 'incomplete', output: { type: 'text', text: INTERRUPTED_TOOL_TEXT } },
    ])

    const model = new ScriptedModel([[assistantMessage('The lookup worked; the long job was interrupted.')]])
    const noop = (name: string) =>
      tool({ name, description: name, parameters: z.object({}).passthrough(), execute: async () => 'ok' })
    const agent = new Agent({ name: 'Worker', instructions: 'Use the tools.', model, tools: [noop('lookup'), noop('hang')] })
    const untrack = trackToolCalls(agent, session)
    const result = await run(agent, 'Did it finish?', { session })
    untrack()
    expect(result.finalOutput).toBe('The lookup worked; the long job was interrupted.')

    // The model saw the interrupted call answered with the crash text, right after the call.
    const input = model.calls[0]?.request.input as AgentInputItem[]
    const hangAt = input.findIndex((i) => i.type === 'function_call' && i.callId === 'call_hang')
    expect(hangAt).toBeGreaterThan(-1)
    expect(input[hangAt + 1]).toMatchObject({
      type: 'function_call_result',
      callId: 'call_hang',
      output: { type: 'text', text: INTERRUPTED_TOOL_TEXT },
    })

    const final = await session.getItems()
    expect(final.slice(0, items.length)).toEqual(items)
    expect(final.slice(items.length)).toEqual([
      { type: 'message', role: 'user', content: 'Did it finish?' },
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'The lookup worked; the long job was interrupted.' }] },
    ])
    expect(calls(final).map((c) => c.type === 'function_call' && c.callId)).toEqual(['call_lookup', 'call_hang'])
    expect(results(final)).toHaveLength(2)
    await session.close()

    // Nothing stored twice: one call block and one result per callId, one user message per input.
    const events = await linesOf(path)
    const callBlocks = events.flatMap((e) =>
      e.type === 'assistant/message'
        ? (e.data?.content as { type: string; callId?: string }[]).filter((b) => b.type === 'tool-call')
        : [],
    )
    expect(callBlocks.map((b) => b.callId)).toEqual(['call_lookup', 'call_hang'])
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data?.callId)).toEqual(['call_lookup', 'call_hang'])
    expect(events.filter((e) => e.type === 'user/message')).toHaveLength(2)
    // The repair closed the killed turn as interrupted; toModelHistory is balanced on the log.
    expect(events.filter((e) => e.type === 'turn/end').map((e) => (e.data?.reason as { kind: string }).kind)).toEqual([
      'interrupted',
      'completed',
    ])
    const history = toModelHistory(events as never)
    expect(history.messages.filter((m) => m.role === 'tool').map((m) => m.callId)).toEqual(['call_lookup', 'call_hang'])
    expect(history.messages.some((m) => m.synthetic)).toBe(false)
    expect(await verifyStatus(root)).toEqual(['ok'])
    const markdown = await cli('export', ID, '--format', 'md', '--root', root)
    expect(markdown).toContain(INTERRUPTED_TOOL_TEXT)
    expect(markdown).toContain('found weather')
  })
})
