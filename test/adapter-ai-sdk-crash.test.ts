// A real AI SDK loop (MockLanguageModelV3) in a child process, SIGKILLed inside a tool's execute,
// then resumed here: the model is told the interrupted call was cut by a crash, the next run
// completes, and nothing is stored twice. Needs the built package (`npx tsc -p tsconfig.json`).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { generateText, type ModelMessage } from 'ai'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { asObject } from '../src/session/as-object.js'
import { INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import type { SessionEvent } from '../src/session/schema.js'
import { toModelHistory } from '../src/session/history.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'
import { tmpRoot } from './helpers/tmp-root.js'

const cliMain = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))
const cli = (args: string[]) => spawnSync(process.execPath, [cliMain, ...args], { encoding: 'utf8' })
const agent = fileURLToPath(new URL('./fixtures/ai-sdk-agent.mjs', import.meta.url))
const built = fileURLToPath(new URL('../dist/adapters/ai-sdk/index.js', import.meta.url))

/** Runs the agent until its `slow` tool is running, then SIGKILLs it; resolves with that call id. */
async function killInsideTool(root: string, id: string, api: 'generate' | 'stream'): Promise<string> {
  const child = spawn(process.execPath, [agent, root, id, api], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += String(d)))
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
  let inTool: string | undefined
  for await (const line of createInterface({ input: child.stdout })) {
    const message = JSON.parse(line) as { inTool?: string }
    if (message.inTool) {
      inTool = message.inTool
      child.kill('SIGKILL')
      break
    }
  }
  expect(await exited, stderr).toBe('SIGKILL')
  if (!inTool) throw new Error(`the agent never reached its tool: ${stderr}`)
  return inTool
}

const ofCall = (events: readonly SessionEvent[], type: string, callId: string) =>
  events.filter((e) => e.type === type && (e.data as { callId?: unknown } | undefined)?.callId === callId)

/** What an app that saved the AI SDK's messages itself holds after the crash: the call, no result. */
function rawHistory(events: readonly SessionEvent[]): ModelMessage[] {
  const messages: ModelMessage[] = []
  for (const e of events) {
    const d = e.data as Record<string, unknown>
    if (e.type === 'user/message') messages.push({ role: 'user', content: d.content as string })
    if (e.type === 'tool/call') {
      messages.push({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: d.callId as string, toolName: d.name as string, input: d.arguments }] })
    }
  }
  return messages
}

for (const api of ['generate', 'stream'] as const) {
  describe(`an AI SDK run (${api}Text) killed inside a tool`, () => {
    it('resumes with the call answered by the crash text, completes, and stores nothing twice', async () => {
      expect(existsSync(built), 'build the package first: npx tsc -p tsconfig.json').toBe(true)
      const root = await tmpRoot()
      const id = `crash-${api}`
      const callId = await killInsideTool(root, id, api)
      expect(callId).toBe('call-slow')

      // The call is on record before the tool ran; no result, the turn open.
      const persistence = createJsonlPersistence({ root })
      const inspected = await persistence.inspect(id) // with the repair computed in memory
      const before = { events: inspected.events.slice(0, inspected.events.length - (inspected.repair?.closers.length ?? 0)) }
      expect(inspected.repair?.persisted).toBe(false)
      expect(ofCall(before.events, 'tool/call', callId)).toHaveLength(1)
      expect(ofCall(before.events, 'tool/result', callId)).toHaveLength(0)
      expect(ofCall(before.events, 'tool/result', 'call-read-1')).toHaveLength(1) // step 0 is complete

      // Replayed without the adapter, that history makes the AI SDK throw.
      const naive = scriptedModel([{ text: 'never' }])
      const thrown = await generateText({ model: naive.model, messages: [...rawHistory(before.events), { role: 'user', content: 'go on' }] }).then(
        () => undefined,
        (e: unknown) => e as { name?: string },
      )
      expect(thrown?.name).toBe('AI_MissingToolResultsError')
      expect(naive.prompts).toHaveLength(0)

      // Resume: load repairs the log, the next run is told what happened and completes.
      const session = await openAiSdkSession({ persistence, sessionId: id })
      expect(session.repair?.closers.map((e) => e.type)).toContain('turn/end')
      const { model, prompts } = scriptedModel([{ text: 'The indexing job was interrupted; I will retry it later.' }])
      const turn = session.turn()
      const result = await generateText({ model, ...turn.settings })
      await turn.done
      expect(result.text).toBe('The indexing job was interrupted; I will retry it later.')
      const answer = prompts[0]!
        .filter((m) => m.role === 'tool')
        .flatMap((m) => m.content)
        .find((p) => p.type === 'tool-result' && p.toolCallId === callId)
      expect(answer).toMatchObject({ type: 'tool-result', toolCallId: callId, toolName: 'slow', output: { type: 'error-text', value: INTERRUPTED_TOOL_TEXT } })
      expect(prompts[0]!.filter((m) => m.role === 'user')).toHaveLength(1)
      await session.close()

      // The log: contiguous, each call and each result once, the user's message once, both turns ended.
      const after = (await persistence.inspect(id)).events
      expect(after.map((e) => e.seq)).toEqual(after.map((_, i) => i))
      expect(after.slice(0, before.events.length)).toEqual(before.events)
      for (const call of ['call-read-1', 'call-slow', 'call-read-2']) {
        const calls = ofCall(after, 'tool/call', call).length
        expect(calls).toBeLessThanOrEqual(1)
        expect(ofCall(after, 'tool/result', call)).toHaveLength(call === 'call-read-2' ? calls : 1)
      }
      expect(after.filter((e) => e.type === 'user/message')).toHaveLength(1)
      expect(after.filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: { kind: string } }).reason.kind)).toEqual(['interrupted', 'completed'])
      // Balanced from what is stored: no call needs a made-up result (the crash's closers answer
      // the interrupted ones). Calls the crash cut off before their step's message was written
      // are shown in a synthetic assistant message; each call is offered once and answered once.
      const history = toModelHistory(after).messages
      expect(history.filter((m) => m.synthetic && m.role !== 'assistant')).toEqual([])
      const offered = history.flatMap((m) =>
        m.role === 'assistant' && Array.isArray(m.content)
          ? m.content.flatMap((b) => (asObject(b)?.type === 'tool-call' ? [String(asObject(b)?.callId)] : []))
          : [],
      )
      expect(offered).toContain(callId)
      expect(new Set(offered).size).toBe(offered.length)
      expect(history.filter((m) => m.role === 'tool').map((m) => m.callId).sort()).toEqual([...offered].sort())
      await persistence.closeAll()

      // The CLI reads what the adapter wrote: verify finds nothing wrong, show renders both turns.
      const verified = cli(['--root', root, 'verify'])
      expect(verified.status, verified.stderr).toBe(0)
      const shown = cli(['--root', root, 'show', id])
      expect(shown.status, shown.stderr).toBe(0)
      expect(shown.stdout).toContain('call-read-1')
      expect(shown.stdout).toContain('The indexing job was interrupted; I will retry it later.')
    })
  })
}
