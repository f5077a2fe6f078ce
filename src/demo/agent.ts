// The demo's agent process: a reference-host agent with the plugin registered. It reports every
// acknowledged flush to its parent on stdout (one JSON object per line) until it is killed.
import { sessionPersistencePlugin } from '../index.js'
import { createReferenceHost } from '../testing/index.js'

const [root, sessionId, cwd] = process.argv.slice(2)
if (!root || !sessionId) throw new Error('usage: agent <root> <session-id> [cwd]')

const send = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`)
const plugin = sessionPersistencePlugin({ root, flushDelayMs: 50 })
plugin.on('error', (e) => send({ error: e.code, message: e.message }))
plugin.on('recovered', (id, after) => send({ recovered: id, after: after.code }))
const host = createReferenceHost(cwd ? { cwd } : {})
await plugin.apply(host)

const s = host.startSession({ id: sessionId, extra: { title: 'Fix the failing test' } })
const acknowledge = async () => {
  await plugin.flush(sessionId)
  send({ ack: s.events.length })
}

s.runTurn({
  user: 'Why does the date test fail?',
  header: { model: 'reference-model', system: 'You are a coding agent.', tools: ['read', 'bash'] },
  steps: [
    { text: 'Let me read the test.', toolCalls: [{ name: 'read', arguments: { path: 'test/date.test.ts' } }], results: ['expect(format(d)).toBe("2026-11-30")'] },
    { text: 'The test assumes UTC; format() uses local time.' },
  ],
})
await acknowledge()
s.runTurn({
  user: 'Fix it.',
  steps: [
    { text: 'Patching format() to use UTC.', toolCalls: [{ name: 'edit', arguments: { path: 'src/date.ts' } }], results: ['1 line changed'] },
    { text: 'Done: format() now uses getUTC* accessors.' },
  ],
})
await acknowledge()

// Turn 3: a long tool call. It is dispatched (and durable), then streams its output while the
// parent kills this process with SIGKILL.
s.requestHeader({ model: 'reference-model', system: 'You are a coding agent.', tools: ['read', 'bash', 'edit'] }, 'change')
s.beginTurn('Run the whole test suite.')
const [callId] = s.step({ text: 'Running the suite.', toolCalls: [{ name: 'bash', arguments: { cmd: 'npm test' } }] })
await acknowledge()
send({ inflight: callId })
const line = `${'PASS test/some.test.ts ✓ '.repeat(40)}\n`
for (let i = 0; ; i++) {
  s.emit('tool/output', { callId: callId ?? null, text: line.repeat(1500), part: i }, { ignorable: true })
  await acknowledge()
}
