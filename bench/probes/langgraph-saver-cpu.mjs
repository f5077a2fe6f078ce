// SessionCheckpointSaver's own CPU per super-step, without LangGraph and without I/O: the calls
// of one 'sync' super-step of bench/adapters-langgraph.mjs's graph (a putWrites of the task's
// writes, then the put of the next checkpoint, awaited together) over the package's in-memory
// backend, a new thread every 20 steps as in the bench; CPU µs per step, median of interleaved
// rounds (min–max), for each build given (an A/B runs both in one process).
// Usage: node bench/probes/langgraph-saver-cpu.mjs [--rounds N] [--threads N]
//   SPJ_BENCH_DIST=<dist>[,<dist>…] (default dist/).
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { uuid6 } from '@langchain/langgraph-checkpoint'
import { median } from '../lib.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const ROUNDS = Math.max(5, arg('rounds', 9))
const THREADS = arg('threads', 100)
const STEPS = 20
const dists = (process.env.SPJ_BENCH_DIST ?? new URL('../../dist/', import.meta.url).pathname).split(',').map((d) => resolve(d))

const contenders = []
for (const [k, dist] of dists.entries()) {
  const base = `${pathToFileURL(dist).href}/`
  const { SessionCheckpointSaver } = await import(`${base}adapters/langgraph/index.js`)
  const { createMemoryPersistence } = await import(`${base}testing/index.js`)
  contenders.push({ name: dists.length > 1 ? `build ${String.fromCharCode(65 + k)}` : 'saver', saver: new SessionCheckpointSaver({ persistence: createMemoryPersistence(), idleMs: Infinity }), cpu: [], wall: [] })
}

/** One thread as the bench's graph writes it: the input checkpoint, then STEPS super-steps. */
async function thread(saver) {
  const threadId = uuid6(-1)
  let config = { configurable: { thread_id: threadId, checkpoint_ns: '' } }
  const checkpoint = (i) => ({
    v: 4,
    id: uuid6(-1),
    ts: new Date().toISOString(),
    channel_values: { count: i, note: `step ${i}: ${'x'.repeat(120)}`, 'branch:to:step': null },
    channel_versions: { __start__: 1, count: i + 1, note: i + 1, 'branch:to:step': i + 1 },
    versions_seen: { __input__: {}, __start__: { __start__: 1 }, step: { 'branch:to:step': i } },
  })
  await saver.getTuple(config)
  config = await saver.put(config, checkpoint(0), { source: 'input', step: -1, parents: {} }, { __start__: 1 })
  for (let i = 1; i <= STEPS; i++) {
    const writes = saver.putWrites(config, [['count', i], ['note', `step ${i}: ${'x'.repeat(120)}`], ['branch:to:step', null]], uuid6(-1), '~__pregel_pull, step')
    const put = saver.put(config, checkpoint(i), { source: 'loop', step: i, parents: {} }, { count: i + 1, note: i + 1, 'branch:to:step': i + 1 })
    ;[, config] = await Promise.all([writes, put])
  }
}

const round = async (c) => {
  const before = process.cpuUsage()
  const t0 = performance.now()
  for (let t = 0; t < THREADS; t++) await thread(c.saver)
  const used = process.cpuUsage(before)
  c.cpu.push(((used.user + used.system) / THREADS / STEPS))
  c.wall.push(((performance.now() - t0) * 1000) / THREADS / STEPS)
}
for (const c of contenders) await round(c) // warm-up
for (const c of contenders) [c.cpu, c.wall] = [[], []]
for (let r = 0; r < ROUNDS; r++) for (let k = 0; k < contenders.length; k++) await round(contenders[(r + k) % contenders.length])
console.log(`The saver's CPU per super-step over the in-memory backend, ${THREADS} threads of ${STEPS} steps a round (median of ${ROUNDS} rounds, min–max)`)
for (const c of contenders) {
  console.log(`  ${c.name.padEnd(8)} cpu ${median(c.cpu).toFixed(1)} µs (${Math.min(...c.cpu).toFixed(1)}–${Math.max(...c.cpu).toFixed(1)})  wall ${median(c.wall).toFixed(1)} µs`)
}
if (contenders.length === 2) {
  const ratio = contenders[1].cpu.map((b, r) => b / contenders[0].cpu[r])
  console.log(`  B ÷ A, round by round: median ${median(ratio).toFixed(3)} (${Math.min(...ratio).toFixed(3)}–${Math.max(...ratio).toFixed(3)})`)
}
