// An AI SDK 6 agent loop made durable with session-persistence-jsonl, killed in the middle of a
// tool call and resumed. Fully offline: the model is MockLanguageModelV3 from `ai/test`.
//
//   npm run build && node examples/ai-sdk-crash-resume.mjs
//
// The script runs twice: as the parent, it starts itself as a child process (the "agent") and
// SIGKILLs it while its `deploy` tool is running; then it resumes the session, shows what the
// model is told about the interrupted call, and finishes the conversation.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { generateText, jsonSchema, stepCountIs, tool } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { createJsonlPersistence } from 'session-persistence-jsonl'
import { openAiSdkSession } from 'session-persistence-jsonl/ai-sdk'

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }

/** An offline model answering model call i with `steps[i]`, and printing what it is shown. */
function scriptedModel(steps, { showPrompt = false } = {}) {
  let i = 0
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      if (showPrompt) {
        console.log('  the model is shown:')
        for (const m of prompt) {
          const parts = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content
          for (const p of parts) {
            const what = p.type === 'text' ? JSON.stringify(p.text) : p.type === 'tool-call' ? `${p.toolName}(${JSON.stringify(p.input)})` : p.type === 'tool-result' ? `${p.output.type}: ${JSON.stringify(p.output.value)}` : p.type
            console.log(`    ${m.role.padEnd(9)} ${p.type.padEnd(11)} ${what}`)
          }
        }
      }
      const step = steps[Math.min(i++, steps.length - 1)]
      const content = [{ type: 'text', text: step.text }]
      for (const c of step.calls ?? []) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) })
      return { content, finishReason: { unified: step.calls ? 'tool-calls' : 'stop', raw: undefined }, usage, warnings: [] }
    },
  })
}

const [role, root] = process.argv.slice(2)

if (role === 'agent') {
  // ---- the agent process: create or resume the session, run one turn; killed inside `deploy` ----
  const persistence = createJsonlPersistence({ root })
  const session = await openAiSdkSession({ persistence, sessionId: 'deploy-chat', cwd: process.cwd() })
  const tools = {
    runTests: tool({
      description: 'Run the test suite',
      inputSchema: jsonSchema({ type: 'object', properties: {} }),
      execute: async () => '42 passed',
    }),
    deploy: tool({
      description: 'Deploy to production',
      inputSchema: jsonSchema({ type: 'object', properties: { env: { type: 'string' } } }),
      execute: async () => {
        setInterval(() => {}, 60_000) // a long deployment...
        process.stdout.write(`${JSON.stringify({ inTool: 'deploy' })}\n`) // ...during which the process dies
        return new Promise(() => {})
      },
    }),
  }
  const model = scriptedModel([
    { text: 'Running the tests first.', calls: [{ id: 'call-tests', name: 'runTests', input: {} }] },
    { text: 'Tests pass. Deploying.', calls: [{ id: 'call-deploy', name: 'deploy', input: { env: 'production' } }] },
  ])
  const turn = session.turn('Run the tests, then deploy to production.')
  await generateText({ model, stopWhen: stepCountIs(10), ...turn.settings, tools: turn.guardTools(tools) })
  await turn.done
} else {
  // ---- the parent: run the agent, kill it inside the tool, resume ----
  const dir = mkdtempSync(join(tmpdir(), 'ai-sdk-example-'))
  try {
    console.log('1. The agent runs a turn; its `deploy` tool is running when the process is killed (SIGKILL).')
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'agent', dir], { stdio: ['ignore', 'pipe', 'inherit'] })
    const exited = new Promise((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
    for await (const line of createInterface({ input: child.stdout })) {
      if (JSON.parse(line).inTool) {
        child.kill('SIGKILL')
        break
      }
    }
    console.log(`   agent exited by ${await exited}`)

    const persistence = createJsonlPersistence({ root: dir })
    const session = await openAiSdkSession({ persistence, sessionId: 'deploy-chat' })
    console.log('\n2. Resumed. The log on disk (one line per event):')
    for (const line of readFileSync(persistence.locate(session.meta).path, 'utf8').trimEnd().split('\n').slice(1)) {
      const e = JSON.parse(line)
      console.log(`   ${String(e.seq).padStart(2)} ${e.type.padEnd(17)} ${JSON.stringify(e.data).slice(0, 90)}`)
    }
    console.log(`   load repaired the crash: ${session.repair?.closers.length ?? 0} closing events appended`)

    console.log('\n3. The next turn continues the conversation; the interrupted call is answered:')
    const turn = session.turn('Did the deployment go through?')
    const result = await generateText({
      model: scriptedModel([{ text: 'The deployment was interrupted by a crash, so it may not have completed. Shall I check its status?' }], { showPrompt: true }),
      ...turn.settings,
    })
    await turn.done
    console.log(`\n   assistant: ${result.text}`)
    await session.close()
    await persistence.closeAll()
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
