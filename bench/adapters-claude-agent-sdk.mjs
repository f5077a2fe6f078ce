// The Claude Agent SDK store against its backend, same run, medians of per-round ratios:
// - `append` of a 20-entry batch through the store vs the backend's own `append` of the same
//   events (JSONL, sync 'data'): the store's whole cost (validation, uuid de-dup, mapping).
//   Fair by construction: the backend's events are made by the store's own `entryEvent` (the
//   same lines, byte for byte, entry and readable copy), before its timer starts (the store's
//   timer includes making them); both sessions are open, in the same bucket, with the same
//   sync setting; the pairs alternate which goes first;
// - `load` of a 10,000-entry session through the store vs the backend's `load` (fresh instances);
// - the whole offline two-turn `query()` (the SDK's bundled CLI against a fake Messages API on
//   loopback) with the store (JSONL) and without it. Skipped, with one line, without the SDK.
// Each round measures both contenders in alternating order (the machine is shared and noisy).
// Usage: npm run build && node --expose-gc bench/adapters-claude-agent-sdk.mjs [--rounds N] [--queries N]
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { createSessionStore, entryEvent, sessionIdOf } from '../dist/adapters/claude-agent-sdk/index.js'
import { createJsonlPersistence } from '../dist/index.js'
import { createMemoryPersistence, MemoryStore } from '../dist/testing/index.js'
import { converse, openStore } from '../test/fixtures/claude-agent-sdk-agent.mjs'
import { conversationScript, startFakeAnthropic } from '../test/fixtures/claude-agent-sdk-fake-api.mjs'
import { ensureClaudeAgentSdk } from '../test/helpers/claude-agent-sdk-install.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const ROUNDS = Math.max(5, arg('rounds', 9))
const QUERIES = Math.max(5, arg('queries', 5))
const BATCH = 20
const APPENDS_PER_ROUND = 25
const LOAD_ENTRIES = 10_000

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const sum = (xs) => xs.reduce((a, x) => a + x, 0)
const fmt = (xs) => `${median(xs).toFixed(2)} ms (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`
const gc = () => globalThis.gc?.()

/** Entry `n` of a transcript shaped like the SDK's: prompts, tool uses, results, attachments. */
function entry(n, run) {
  const base = { parentUuid: `u-${run}-${n - 1}`, isSidechain: false, userType: 'external', cwd: '/work/app', sessionId: 'bench', version: '2.1.332', uuid: `u-${run}-${n}`, timestamp: new Date(1_764_489_600_000 + n).toISOString() }
  switch (n % 5) {
    case 0:
      return { ...base, type: 'user', message: { role: 'user', content: [{ type: 'text', text: `Question ${n}: summarise the file and fix the failing test.` }] } }
    case 1:
      return { ...base, type: 'assistant', message: { id: `msg_${n}`, type: 'message', role: 'assistant', model: 'claude-fake', content: [{ type: 'tool_use', id: `toolu_${run}_${n}`, name: 'Bash', input: { command: `npm test -- --grep case-${n}`, description: 'Run the test' } }], stop_reason: 'tool_use', usage: { input_tokens: 1200, output_tokens: 40 } } }
    case 2:
      return { ...base, type: 'user', message: { role: 'user', content: [{ tool_use_id: `toolu_${run}_${n - 1}`, type: 'tool_result', content: 'ok 1 - case passes\n'.repeat(12), is_error: false }] }, toolUseResult: { stdout: 'ok 1 - case passes\n'.repeat(12), stderr: '', interrupted: false } }
    case 3:
      return { ...base, type: 'attachment', attachment: { type: 'date', date: '2026-12-01' } }
    default:
      return { ...base, type: 'assistant', message: { id: `msg_${n}`, type: 'message', role: 'assistant', model: 'claude-fake', content: [{ type: 'text', text: `The test passes now; the fix was in case ${n}.` }], stop_reason: 'end_turn' } }
  }
}
const batchOf = (run, from) => Array.from({ length: BATCH }, (_, i) => entry(from + i, run))

const dir = await mkdtemp(join(tmpdir(), 'spj-bench-claude-'))
const out = []
try {
  // ── append ──────────────────────────────────────────────────────────────────────────────
  // Over the JSONL backend (what users get), and over the in-memory one (the store's own work,
  // with no I/O to hide it: a steadier figure on a noisy machine).
  for (const backendName of ['jsonl', 'memory']) {
  const appendRatios = []
  const sumRatios = []
  const storeTimes = []
  const backendTimes = []
  const shared = new MemoryStore()
  for (let round = 0; round < ROUNDS; round++) {
    const root = join(dir, `append-${round}`)
    const make = () => (backendName === 'jsonl' ? createJsonlPersistence({ root }) : createMemoryPersistence({ store: shared }))
    const persistence = make()
    const store = createSessionStore({ persistence: make() })
    const key = { projectKey: '-work-app', sessionId: `store-${backendName}-${round}` }
    const id = `backend-${backendName}-${round}`
    await persistence.create({ id, createdAt: Date.now(), delegationDepth: 0, cwd: '/work/app' })
    // The first append materializes each log (not what is measured).
    await store.append(key, batchOf(round, 0))
    let seq = 0
    const first = batchOf(round, 0).map((e, i) => entryEvent(e, i, Date.now()))
    await persistence.append(id, first)
    seq += first.length
    const run = {
      store: async (i) => {
        const batch = batchOf(round, BATCH * (i + 1))
        const t0 = performance.now()
        await store.append(key, batch)
        return performance.now() - t0
      },
      backend: async (i) => {
        const events = batchOf(round, BATCH * (i + 1)).map((e, j) => entryEvent(e, seq + j, Date.now()))
        const t0 = performance.now()
        await persistence.append(id, events)
        const ms = performance.now() - t0
        seq += events.length
        return ms
      },
    }
    // Pairs: each batch of the store next to one of the backend, in alternating order.
    const s = []
    const b = []
    for (let i = 0; i < APPENDS_PER_ROUND; i++) {
      if ((i + round) % 2) {
        s.push(await run.store(i))
        b.push(await run.backend(i))
      } else {
        b.push(await run.backend(i))
        s.push(await run.store(i))
      }
    }
    // A round's figure is its median pair ratio (one stall of the shared disk, several times a
    // batch's time, moves a round's sum far more than the store's work does); its sums'
    // ratio is printed beside it.
    storeTimes.push(median(s))
    backendTimes.push(median(b))
    appendRatios.push(median(s.map((x, j) => x / b[j])))
    sumRatios.push(sum(s) / sum(b))
    await store.close()
    await persistence.closeAll()
  }
  out.push([
    `append, 20 entries (${backendName === 'jsonl' ? 'JSONL, sync data' : 'in-memory backend'})`,
    `store ${fmt(storeTimes)}`,
    `backend ${fmt(backendTimes)}`,
    `${median(appendRatios).toFixed(3)}× (${Math.min(...appendRatios).toFixed(3)}–${Math.max(...appendRatios).toFixed(3)})${backendName === 'jsonl' ? ' (target ≤ 1.1)' : ''}; ratio of sums ${median(sumRatios).toFixed(3)}× (${Math.min(...sumRatios).toFixed(3)}–${Math.max(...sumRatios).toFixed(3)})`,
  ])
  }

  // ── load ────────────────────────────────────────────────────────────────────────────────
  const root = join(dir, 'load')
  const key = { projectKey: '-work-app', sessionId: 'long-session' }
  const writer = createSessionStore({ persistence: createJsonlPersistence({ root, sync: 'none' }) })
  for (let from = 0; from < LOAD_ENTRIES; from += 500) await writer.append(key, Array.from({ length: 500 }, (_, i) => entry(from + i, 'L')))
  await writer.close()
  const id = sessionIdOf(key)
  const loadRatios = []
  const storeLoads = []
  const backendLoads = []
  for (let round = 0; round < ROUNDS; round++) {
    const contenders = {
      store: async () => {
        const store = createSessionStore({ persistence: createJsonlPersistence({ root }) })
        gc()
        const t0 = performance.now()
        const entries = await store.load(key)
        const ms = performance.now() - t0
        if (entries.length !== LOAD_ENTRIES) throw new Error(`store loaded ${entries.length} entries`)
        return ms
      },
      backend: async () => {
        const persistence = createJsonlPersistence({ root })
        gc()
        const t0 = performance.now()
        const { events } = await persistence.load(id)
        const ms = performance.now() - t0
        await persistence.close(id)
        if (events.length !== LOAD_ENTRIES) throw new Error(`backend loaded ${events.length} events`)
        return ms
      },
    }
    const order = round % 2 ? ['store', 'backend'] : ['backend', 'store']
    const t = {}
    for (const name of order) t[name] = await contenders[name]()
    storeLoads.push(t.store)
    backendLoads.push(t.backend)
    loadRatios.push(t.store / t.backend)
  }
  out.push([`load, ${LOAD_ENTRIES} entries (JSONL)`, `store ${fmt(storeLoads)}`, `backend ${fmt(backendLoads)}`, `${median(loadRatios).toFixed(3)}× (target ≤ 1.2)`])

  // ── query() ─────────────────────────────────────────────────────────────────────────────
  const sdk = await ensureClaudeAgentSdk()
  if ('skipped' in sdk) {
    out.push(['two-turn query()', `skipped: ${sdk.skipped}`, '', ''])
  } else {
    const fake = await startFakeAnthropic({ respond: conversationScript() })
    const cwd = join(dir, 'project')
    await mkdir(cwd, { recursive: true })
    const prompts = ['Please use the tool.', 'Now run the long job.']
    const once = async (withStore, i) => {
      const { store, close } = await openStore(withStore ? { kind: 'jsonl', root: join(dir, `query-${i}`) } : { kind: 'none' })
      const t0 = performance.now()
      const { results } = await converse({ sdkEntry: sdk.entry, baseUrl: fake.url, cwd, prompts, store })
      const ms = performance.now() - t0
      await close()
      if (results.length !== 2 || results.some((r) => r !== 'success')) throw new Error(`query ended with ${results.join(', ')}`)
      return ms
    }
    await once(false, -1) // warm-up: the CLI's first start pays for the page cache
    const withStore = []
    const without = []
    const ratios = []
    for (let i = 0; i < QUERIES; i++) {
      const t = {}
      for (const name of i % 2 ? ['with', 'without'] : ['without', 'with']) t[name] = await once(name === 'with', i)
      withStore.push(t.with)
      without.push(t.without)
      ratios.push(t.with / t.without)
    }
    await fake.close()
    out.push(['two-turn query() with a tool use per turn', `with store ${fmt(withStore)}`, `without ${fmt(without)}`, `${median(ratios).toFixed(3)}×`])
  }
} finally {
  await rm(dir, { recursive: true, force: true })
}

console.log(
  `Claude Agent SDK store: ${ROUNDS} rounds (append: ${APPENDS_PER_ROUND} interleaved pairs a round), ${QUERIES} queries; medians over rounds (min–max); ` +
    `append: a round's times are its medians, its ratio the median of its pair ratios (its sums' ratio beside it); load and query(): one pair a round`,
)
for (const row of out) console.log(`  ${row.filter(Boolean).join('  |  ')}`)
