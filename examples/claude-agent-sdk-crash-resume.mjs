// A Claude Agent SDK session that survives the loss of its machine, offline: a two-turn query()
// mirrors to the store (a JSONL root here; PostgreSQL with SPJ_PG_URL set), the process is
// SIGKILLed while the second turn's tool runs, and a "new machine" (a new process with an empty
// CLAUDE_CONFIG_DIR) resumes the session from the store alone. The model is a fake Messages API
// on loopback; the SDK's CLI is installed into test/.work on first run (~400 MB).
// Usage: npm run build && node examples/claude-agent-sdk-crash-resume.mjs
import { fork } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { openStore } from '../test/fixtures/claude-agent-sdk-agent.mjs'
import { conversationScript, startFakeAnthropic } from '../test/fixtures/claude-agent-sdk-fake-api.mjs'
import { ensureClaudeAgentSdk } from '../test/helpers/claude-agent-sdk-install.mjs'

const AGENT = fileURLToPath(new URL('../test/fixtures/claude-agent-sdk-agent.mjs', import.meta.url))
const sdk = await ensureClaudeAgentSdk()
if ('skipped' in sdk) {
  console.log(`Cannot run: ${sdk.skipped}`)
  process.exit(1)
}

const dir = await mkdtemp(join(tmpdir(), 'spj-claude-example-'))
const cwd = join(dir, 'project')
await mkdir(cwd)
const marker = join(dir, 'tool-is-running')
// SessionStoreFlush: 'batched' (the SDK's default) or 'eager' (FLUSH=eager): see step 2.
const flush = process.env.FLUSH === 'eager' ? 'eager' : 'batched'
const backend = process.env.SPJ_PG_URL ? { kind: 'postgres', url: process.env.SPJ_PG_URL, schema: 'claude_example' } : { kind: 'jsonl', root: join(dir, 'sessions') }
const fake = await startFakeAnthropic({ respond: conversationScript({ longCommand: `touch ${marker} && sleep 120` }) })

function run(config) {
  const child = fork(AGENT, [JSON.stringify({ sdkEntry: sdk.entry, baseUrl: fake.url, cwd, backend, flush, ...config })], { detached: true, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const reports = []
  child.on('message', (m) => reports.push(m))
  return { child, reports, exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) }
}

const summary = (entries) =>
  entries
    .filter((e) => (e.type === 'user' || e.type === 'assistant') && e.message?.content !== undefined)
    .flatMap((e) => (typeof e.message.content === 'string' ? [{ type: 'text', text: e.message.content }] : e.message.content).map((b) => `${e.type.padEnd(9)} ${b.type === 'text' ? JSON.stringify(b.text.slice(0, 60)) : b.type === 'tool_use' ? `tool_use ${b.name} ${JSON.stringify(b.input.command)}` : b.type === 'tool_result' ? `tool_result ${b.tool_use_id}` : b.type}`))
    .filter((line) => !line.includes('"<'))

try {
  console.log(`1. machine A: a two-turn query() with sessionStore (${backend.kind}, sessionStoreFlush '${flush}'); SIGKILL while turn 2's tool runs`)
  // Machine A's local config in our directory: a killed process cannot remove it itself.
  const configDir = join(dir, 'config-a')
  await mkdir(configDir)
  const a = run({ configDir, prompts: ['Please use the tool.', 'Now run the long job.', 'unused'] })
  while (!existsSync(marker)) await sleep(50)
  await sleep(300) // the SDK mirrors in batches: give turn 1's batch time to land
  process.kill(-a.child.pid, 'SIGKILL')
  console.log(`   killed: ${(await a.exited).signal}`)
  const sessionId = a.reports.find((r) => r.type === 'init').sessionId

  const { store, close } = await openStore(backend)
  const projectKey = cwd.replace(/[^a-zA-Z0-9]/g, '-')
  console.log(`2. in the store (${projectKey}/${sessionId}):`)
  for (const line of summary((await store.load({ projectKey, sessionId })) ?? [])) console.log(`   ${line}`)
  await close()

  console.log('3. machine B: a new process, empty CLAUDE_CONFIG_DIR, query({ resume }) from the store alone')
  const seen = fake.requests.length
  const b = run({ resume: sessionId, prompts: ['Did it finish?'] })
  console.log(`   exited: ${(await b.exited).code}; mirror errors: ${b.reports.filter((r) => r.type === 'mirror_error').length}`)
  const request = fake.requests.slice(seen).find((r) => Array.isArray(r.tools) && r.tools.length > 0)
  console.log(`4. what the model was sent on resume: ${request.messages.length} messages`)
  for (const line of summary(request.messages.map((m) => ({ type: m.role, message: m })))) console.log(`   ${line}`)
} finally {
  await fake.close()
  await rm(dir, { recursive: true, force: true })
}
