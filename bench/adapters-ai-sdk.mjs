// What durable recording adds to an AI SDK agent loop: a 20-step generateText loop driven by
// MockLanguageModelV3 (19 steps call a tool, the 20th answers), timed with no persistence, with
// the AI SDK recorder (JSONL with the default `sync: 'data'`, JSONL with `sync: 'none'`, and the
// in-memory reference backend, which isolates the recorder's own CPU cost), and through the plugin path (the same events
// emitted into a reference host, sessionPersistencePlugin writing them, a flush awaited before
// each tool runs, when a step starts after another and at the turn's end: the same durable
// points as the recorder).
// Contenders are interleaved (each round starts with a different one); median of the rounds,
// min–max, ratios against the no-persistence loop of the same run.
// Run: npm run build && node bench/adapters-ai-sdk.mjs [rounds=9]
import { generateText, jsonSchema, stepCountIs, tool } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { messagesToDrafts, openAiSdkSession } from '../dist/adapters/ai-sdk/index.js'
import { createJsonlPersistence, sessionPersistencePlugin } from '../dist/index.js'
import { createMemoryPersistence, createReferenceHost } from '../dist/testing/index.js'
import { cleanup, interleave, scratch, stats } from './lib.mjs'

const ROUNDS = Number(process.argv[2] ?? 9)
const STEPS = 20
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }

/** A fresh model playing the 20-step script. */
function model() {
  let i = 0
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const step = i++
      if (step < STEPS - 1) {
        return {
          content: [
            { type: 'text', text: `Step ${step}: reading the next file.` },
            { type: 'tool-call', toolCallId: `call-${step}`, toolName: 'read', input: JSON.stringify({ path: `src/file-${step}.ts` }) },
          ],
          finishReason: { unified: 'tool-calls', raw: undefined },
          usage,
          warnings: [],
        }
      }
      return { content: [{ type: 'text', text: 'All files read.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] }
    },
  })
}

const FILE = 'export const x = 1\n'.repeat(20)
const tools = {
  read: tool({
    inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } } }),
    execute: async ({ path }) => `// ${path}\n${FILE}`,
  }),
}

const loop = (settings) => generateText({ model: model(), tools, stopWhen: stepCountIs(STEPS + 1), ...settings })

const root = scratch('adapters-ai-sdk')
const jsonl = createJsonlPersistence({ root })
const jsonlNoSync = createJsonlPersistence({ root: scratch('adapters-ai-sdk-nosync'), sync: 'none' })
const memory = createMemoryPersistence()
const pluginRoot = scratch('adapters-ai-sdk-plugin')
const plugin = sessionPersistencePlugin({ root: pluginRoot })
const host = createReferenceHost()
await plugin.apply(host)

let appends = 0
const counted = (inner) => ({
  locate: (m) => inner.locate(m),
  create: (m) => inner.create(m),
  append: (id, e) => (appends++, inner.append(id, e)),
  load: (id, o) => inner.load(id, o),
  inspect: (id) => inner.inspect(id),
  list: (o) => inner.list(o),
  delete: (id) => inner.delete(id),
  close: (id) => inner.close(id),
})
const jsonlCounted = counted(jsonl)

async function recorder(persistence, id) {
  const session = await openAiSdkSession({ persistence, sessionId: id })
  const turn = session.turn('Read every file.')
  const result = await loop(turn.settings)
  await turn.done
  await session.close()
  if (result.steps.length !== STEPS) throw new Error(`expected ${STEPS} steps, got ${result.steps.length}`)
}

/** The same events through a host and the plugin; durable before each tool runs and at the end. */
async function pluginPath(id) {
  const s = host.startSession({ id })
  const emit = (drafts) => drafts.forEach((d) => s.emit(d.type, d.data, d.ignorable ? { ignorable: true } : undefined))
  let consumed = 0
  s.emit('turn/start', { turn: 1 })
  s.emit('user/message', { content: 'Read every file.' })
  await loop({
    messages: [{ role: 'user', content: 'Read every file.' }],
    experimental_onStepStart: async (e) => {
      s.emit('step/start', { turn: 1, step: e.stepNumber })
      if (e.stepNumber > 0) await plugin.flush(id) // the previous step's results, before the next model call
    },
    experimental_onToolCallStart: async (e) => {
      s.emit('tool/call', { turn: 1, step: e.stepNumber, callId: e.toolCall.toolCallId, name: e.toolCall.toolName, arguments: e.toolCall.input })
      await plugin.flush(id)
    },
    onStepFinish: (e) => {
      emit(messagesToDrafts(e.response.messages.slice(consumed), { turn: 1, step: e.stepNumber }))
      consumed = e.response.messages.length
      s.emit('step/end', { turn: 1, step: e.stepNumber })
    },
  })
  s.emit('turn/end', { turn: 1, reason: { kind: 'completed' } })
  await plugin.flush(id)
  s.dispose()
}

const contenders = [
  ['no persistence', () => loop({ messages: [{ role: 'user', content: 'Read every file.' }] })],
  ['recorder, JSONL', (i) => recorder(jsonlCounted, `rec-${i}`)],
  ['recorder, JSONL none', (i) => recorder(jsonlNoSync, `nosync-${i}`)],
  ['recorder, in-memory', (i) => recorder(memory, `mem-${i}`)],
  ['plugin path, JSONL', (i) => pluginPath(`plug-${i}`)],
]

await interleave(contenders, 1) // warm-up round (JIT, first directory creations)
const before = appends
const { rounds } = await interleave(
  contenders.map(([name, run]) => [name, (i) => run(i + 1000)]),
  ROUNDS,
  { perRound: true },
)
const appendsPerLoop = (appends - before) / ROUNDS

const base = stats(rounds['no persistence'])
const fmt = (ms) => ms.toFixed(2)
console.log(`AI SDK loop: ${STEPS} steps, ${STEPS - 1} tool calls, ${ROUNDS} interleaved rounds (median, min–max); node ${process.version}`)
console.log(`recorder appends per loop: ${appendsPerLoop} (steps + tool calls = ${STEPS + STEPS - 1})`)
for (const [name] of contenders) {
  const s = stats(rounds[name])
  console.log(
    `${name.padEnd(22)} ${fmt(s.median).padStart(8)} ms  (${fmt(s.min)}–${fmt(s.max)})  ×${(s.median / base.median).toFixed(2)}  +${fmt(s.median - base.median)} ms`,
  )
}

await plugin.dispose()
await jsonl.closeAll()
await jsonlNoSync.closeAll()
cleanup(root)
cleanup(jsonlNoSync.root)
cleanup(pluginRoot)
