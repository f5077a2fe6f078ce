// `npm run demo`: the package's main job, end to end, in a few seconds.
import { spawn } from 'node:child_process'
import { rm } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { resolve } from 'node:path'
import {
  createJsonlPersistence,
  INTERRUPTED_TOOL_TEXT,
  type JsonValue,
  sessionPersistencePlugin,
  toModelHistory,
} from '../index.js'
import { createReferenceHost } from '../testing/index.js'
import { jsonlPath } from '../session/location.js'

const root = resolve(process.argv[2] ?? 'demo-sessions')
const sessionId = 'demo-session'
const say = (text = '') => console.log(text)
const short = (v: JsonValue, n = 70) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v)
  return s.length > n ? `${s.slice(0, n - 1)}…` : s
}

await rm(root, { recursive: true, force: true })
say(`session-persistence-jsonl demo — writing to ${root}`)
say()
say('1. An agent process runs with the plugin registered and works through three turns.')

const child = spawn(process.execPath, [fileURLToPath(new URL('./agent.js', import.meta.url)), root, sessionId, process.cwd()], {
  stdio: ['ignore', 'pipe', 'inherit'],
})
let acknowledged = 0
let killedWhile: string | undefined
const lines = createInterface({ input: child.stdout })
lines.on('line', (text) => {
  const msg = JSON.parse(text) as { ack?: number; inflight?: string; error?: string; message?: string; recovered?: string; after?: string }
  if (msg.ack !== undefined) acknowledged = msg.ack
  if (msg.error) say(`   agent reported ${msg.error}: ${msg.message}`)
  if (msg.recovered) say(`   agent recovered: session ${msg.recovered} is written again after ${msg.after}`)
  if (msg.inflight && !killedWhile) {
    killedWhile = msg.inflight
    // Let the tool stream output for a moment, then pull the plug mid-write.
    setTimeout(() => child.kill('SIGKILL'), 120 + Math.floor(Math.random() * 80))
  }
})
const exit = await new Promise<NodeJS.Signals | null>((done) => child.on('exit', (_code, signal) => done(signal)))
say(`   turn 3 dispatched tool call ${killedWhile}; while its output streamed in, the agent was killed with ${exit ?? 'exit'} (kill -9).`)
say(`   The agent had ${acknowledged} events acknowledged as durable (flush resolved) when it died.`)
say()

say('2. A fresh process resumes the session: plugin.persistence.load, then host.resume(loaded).')
const plugin = sessionPersistencePlugin({ root })
const host = createReferenceHost({ cwd: process.cwd() })
await plugin.apply(host)
const loaded = await plugin.persistence.load(sessionId)
const repair = loaded.repair
if (!repair) {
  say('   No repair was needed.')
} else {
  if (repair.truncatedAtByte !== undefined) {
    say(`   Torn tail cut at byte ${repair.truncatedAtByte}: ${repair.droppedBytes} bytes in ${repair.droppedLines} line(s) dropped (${repair.reason}).`)
  } else {
    say('   Nothing was torn: every write() had reached the kernel before the kill (a process crash cannot lose those bytes; a power cut could).')
  }
  say(`   The open turn was closed with ${repair.closers.length} recorded event(s):`)
  for (const c of repair.closers) say(`     seq ${c.seq} ${c.type} ${short(c.data ?? null, 110)}`)
}
const stored = loaded.events.length - (repair?.closers.length ?? 0)
const lost = acknowledged - stored
say(`   ${loaded.events.length} events loaded: ${Math.min(stored, acknowledged)} acknowledged, ${Math.max(0, stored - acknowledged)} written but never acknowledged, ${repair?.closers.length ?? 0} closers.`)
say(`   Acknowledged events lost: ${Math.max(0, lost)}.`)
if (lost > 0) throw new Error(`BUG: ${lost} acknowledged events were lost`)
say()

say('3. The model history handed to the provider is balanced: every tool call has one result.')
const { messages, requestHeader } = toModelHistory(loaded.events)
const render = (content: JsonValue): string =>
  Array.isArray(content)
    ? content
        .map((b) => {
          const block = b as { type?: string; text?: string; name?: string; arguments?: JsonValue }
          if (block.type === 'tool-call') return `→ ${block.name}(${JSON.stringify(block.arguments)})`
          return block.text ?? JSON.stringify(b)
        })
        .join(' ')
    : short(content)
for (const m of messages) {
  say(`   ${m.role.padEnd(9)} ${m.callId ? `[${m.callId}] ` : ''}${short(render(m.content), 100)}`)
}
say(`   request header: ${short(requestHeader ?? null, 100)}`)
const interrupted = messages.some((m) => JSON.stringify(m.content).includes(INTERRUPTED_TOOL_TEXT))
say(`   interrupted call answered with: "${interrupted ? INTERRUPTED_TOOL_TEXT : '(none)'}"`)
say()

say('4. The session continues where it stopped, and a fork branches off after turn 1.')
const live = host.resume(loaded)
live.runTurn({ user: 'Try the suite again.', steps: [{ text: 'All 214 tests pass.', toolCalls: [{ name: 'bash', arguments: { cmd: 'npm test' } }], results: ['214 passed'] }, { text: 'Green.' }] })
const turn1End = loaded.events.findIndex((e) => e.type === 'turn/end') + 1
const fork = host.fork(live, { seedLength: turn1End, id: 'demo-fork' })
fork.runTurn({ user: 'Instead, make the test timezone-independent.', steps: [{ text: 'Pinning TZ=UTC in the test setup.' }] })
await plugin.flush()
say(`   ${sessionId}: now ${live.events.length} events; demo-fork: ${fork.events.length} events (seed of ${turn1End} copied from turn 1).`)
say()

say('5. The sessions under the root (newest first):')
for (const l of await plugin.persistence.list()) {
  const m = l.meta
  say(`   ${m.id.padEnd(14)} ${new Date(m.createdAt).toISOString()}  ${String(l.sizeBytes).padStart(9)} bytes  ${m.parentSession ? `fork of ${m.parentSession} at ${m.seedLength}` : 'top-level'}`)
}
await plugin.dispose()
const again = await createJsonlPersistence({ root }).inspect(sessionId)
say()
say(`Done. Loading it once more needs no repair (${again.repair ? 'UNEXPECTED repair' : 'none'}); the logs are plain JSONL:`)
say(`   head -c 300 ${jsonlPath(createJsonlPersistence({ root }).locate(loaded.meta))}`)
