// getItems() of a 10,000-item JsonlSession against `load` of the same session, same run.
// Each round measures both on fresh backend instances, in alternating order (the machine is
// shared and noisy); prints the medians, their ratio and the min–max of each.
// Usage: npm run build && node --expose-gc bench/adapters-openai-agents.mjs [--items N] [--rounds N]
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { JsonlSession } from '../dist/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../dist/jsonl/jsonl-persistence.js'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const ITEMS = arg('items', 10_000)
const ROUNDS = Math.max(5, arg('rounds', 9))
const ID = 'bench-items'

/** One run's worth of items, the shape a tool-using agent produces. */
function runItems(n) {
  return [
    { type: 'message', role: 'user', content: `Question ${n}: what is ${n} + ${n}?` },
    { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Let me compute that.' }] },
    { type: 'function_call', name: 'add', callId: `call_${n}`, status: 'completed', arguments: JSON.stringify({ a: n, b: n }) },
    { type: 'function_call_result', name: 'add', callId: `call_${n}`, status: 'completed', output: { type: 'text', text: String(2 * n) } },
    { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `${n} + ${n} = ${2 * n}.` }] },
  ]
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const root = await mkdtemp(join(tmpdir(), 'spj-bench-oa-'))
try {
  const writer = new JsonlSession({ persistence: createJsonlPersistence({ root, sync: 'none' }), sessionId: ID })
  let written = 0
  for (let run = 0; written < ITEMS; run++) {
    const items = runItems(run).slice(0, ITEMS - written)
    await writer.addItems(items)
    written += items.length
  }
  await writer.close()

  const contenders = {
    load: async () => {
      const persistence = createJsonlPersistence({ root })
      const t0 = performance.now()
      const { events } = await persistence.load(ID)
      const ms = performance.now() - t0
      await persistence.close(ID)
      return { ms, count: events.length }
    },
    getItems: async () => {
      const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: ID })
      const t0 = performance.now()
      const items = await session.getItems()
      const ms = performance.now() - t0
      await session.close()
      return { ms, count: items.length }
    },
  }
  // Warm-up (module code, file cache), not counted.
  await contenders.load()
  const check = await contenders.getItems()
  if (check.count !== ITEMS) throw new Error(`expected ${ITEMS} items, got ${check.count}`)

  const times = { load: [], getItems: [] }
  let events = 0
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? ['getItems', 'load'] : ['load', 'getItems']
    for (const name of order) {
      // With --expose-gc, each contender starts without the other's garbage to collect.
      globalThis.gc?.()
      const { ms, count } = await contenders[name]()
      times[name].push(ms)
      if (process.env.BENCH_VERBOSE) console.log(round, name, ms.toFixed(1))
      if (name === 'load') events = count
    }
  }
  const fmt = (ms) => `${ms.toFixed(1)} ms`
  const range = (xs) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`
  const mLoad = median(times.load)
  const mItems = median(times.getItems)
  console.log(`session: ${ITEMS} items in ${events} events; ${ROUNDS} rounds, alternating order`)
  console.log(`load(id)            median ${fmt(mLoad)}  (min–max ${range(times.load)})`)
  console.log(`JsonlSession.getItems() median ${fmt(mItems)}  (min–max ${range(times.getItems)})`)
  // Each round's two measurements ran back to back: their ratio cancels most of the drift in load.
  const paired = median(times.getItems.map((ms, i) => ms / times.load[i]))
  console.log(`ratio getItems/load: ${(mItems / mLoad).toFixed(2)}× of the medians, ${paired.toFixed(2)}× median of the per-round ratios, ${(Math.min(...times.getItems) / Math.min(...times.load)).toFixed(2)}× of the minima (target ≤ 1.20×)`)
} finally {
  await rm(root, { recursive: true, force: true })
}
