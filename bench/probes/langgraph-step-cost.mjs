// Where SessionCheckpointSaver's time per super-step goes in bench/adapters-langgraph.mjs's
// pattern (a new thread for each invoke of a 20-super-step graph, durability 'sync'):
//   1. counts, for one invoke: the saver's calls, the backend's calls, and the asynchronous
//      resources created (node:fs requests are the thread-pool trips, Immediates the lingers);
//   2. time per super-step and the process's CPU time per super-step (its thread pool
//      included: the steadier figure on a loaded machine), MemorySaver against the saver over
//      JSONL (`sync: 'data'` and `'none'`), for each build given, interleaved round by round
//      (median of the rounds, min–max): an A/B of two builds runs both in one process, same rounds;
//   3. the control's thread-pool trip (an fstat) timed alone.
//   The modes 'immediate' and 'trip' are MemorySaver whose put first waits a macrotask, or a
//   macrotask and a thread-pool trip; 'backend' is the saver over the package's in-memory
//   backend (no I/O at all). `--warm` runs every invoke of a contender on one thread (its log
//   open) instead of a new thread each.
// Usage: node bench/probes/langgraph-step-cost.mjs [--rounds N] [--invokes N] [--warm] [--modes memory,immediate,trip,data,none,backend]
//   SPJ_BENCH_DIST=<dist>[,<dist>…] (default dist/); BENCH_DIR for the scratch space.
//   For a CPU profile: node --cpu-prof --cpu-prof-dir=<dir> bench/probes/langgraph-step-cost.mjs --modes none --rounds 5
import { createHook } from 'node:async_hooks'
import { fstat, openSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { MemorySaver, uuid6 } from '@langchain/langgraph-checkpoint'
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
import { cleanup, median, scratch } from '../lib.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}
const ROUNDS = Math.max(5, Number(arg('rounds', 9)))
const INVOKES = Number(arg('invokes', 20))
const WARM = process.argv.includes('--warm')
const MODES = String(arg('modes', 'memory,data,none')).split(',')
const STEPS = 20
const dists = (process.env.SPJ_BENCH_DIST ?? new URL('../../dist/', import.meta.url).pathname).split(',').map((d) => resolve(d))

function loopGraph(checkpointer) {
  const State = Annotation.Root({
    count: Annotation({ reducer: (_a, b) => b, default: () => 0 }),
    note: Annotation({ reducer: (_a, b) => b, default: () => '' }),
  })
  return new StateGraph(State)
    .addNode('step', (s) => ({ count: s.count + 1, note: `step ${s.count + 1}: ${'x'.repeat(120)}` }))
    .addEdge(START, 'step')
    .addConditionalEdges('step', (s) => (s.count < STEPS ? 'step' : END), ['step', END])
    .compile({ checkpointer })
}

async function invoke(graph, threadId) {
  const out = await graph.invoke({ count: 0 }, { configurable: { thread_id: threadId }, durability: 'sync', recursionLimit: STEPS + 5 })
  if (out.count !== STEPS) throw new Error(`the graph ran ${out.count} steps`)
}

/** Wraps an object's methods to count their calls into `counts`. */
function counted(obj, names, counts, prefix) {
  for (const name of names) {
    const orig = obj[name]
    if (typeof orig !== 'function') continue
    obj[name] = function (...args) {
      counts[`${prefix}.${name}`] = (counts[`${prefix}.${name}`] ?? 0) + 1
      return orig.apply(this, args)
    }
  }
  return obj
}

const root = scratch('langgraph-step-cost')
try {
  const contenders = MODES.includes('memory') ? [{ name: 'MemorySaver', make: () => ({ saver: new MemorySaver() }) }] : []
  // Controls: MemorySaver whose put (the one call a 'sync' super-step waits for after its
  // putWrites) first waits one macrotask (the saver's linger), or that and one thread-pool trip
  // (an fstat: what any saver writing through node:fs waits for at least once a step).
  const fd = openSync(`${root}/control`, 'w')
  const yielding = (trip) =>
    class extends MemorySaver {
      async put(...args) {
        await new Promise((res) => setImmediate(res))
        if (trip) await new Promise((res, rej) => fstat(fd, (e) => (e ? rej(e) : res())))
        return super.put(...args)
      }
    }
  if (MODES.includes('immediate')) contenders.push({ name: 'MemorySaver + setImmediate', make: () => ({ saver: new (yielding(false))() }) })
  if (MODES.includes('trip')) contenders.push({ name: 'MemorySaver + setImm. + fstat', make: () => ({ saver: new (yielding(true))() }) })
  for (const [k, dist] of dists.entries()) {
    const base = `${pathToFileURL(dist).href}/`
    const { SessionCheckpointSaver } = await import(`${base}adapters/langgraph/index.js`)
    const { createJsonlPersistence } = await import(`${base}index.js`)
    const { createMemoryPersistence } = await import(`${base}testing/index.js`)
    const label = dists.length > 1 ? `build ${String.fromCharCode(65 + k)}` : 'saver'
    for (const mode of MODES.filter((m) => !['memory', 'immediate', 'trip'].includes(m))) {
      contenders.push({
        name: mode === 'backend' ? `${label}, in-memory backend` : `${label}, JSONL sync '${mode}'`,
        make: (counts) => {
          // 'backend': the package's in-memory backend, the saver's own cost without any I/O.
          const persistence =
            mode === 'backend' ? createMemoryPersistence() : createJsonlPersistence({ root: `${root}/${k}-${mode}-${Math.random().toString(36).slice(2)}`, sync: mode })
          if (counts) counted(persistence, ['create', 'append', 'load', 'inspect', 'close', 'list'], counts, 'backend')
          return { saver: new SessionCheckpointSaver({ persistence }) }
        },
      })
    }
  }

  // ---- 1: counts for one invoke on a new thread (after one untimed invoke) ----------------------
  console.log(`1. one invoke of ${STEPS} super-steps (durability 'sync')${WARM ? ' on a thread already open' : ' on a new thread'}: calls and async resources`)
  for (const c of contenders) {
    const counts = {}
    const { saver } = c.make(counts)
    counted(saver, ['getTuple', 'put', 'putWrites', 'list'], counts, 'saver')
    const graph = loopGraph(saver)
    const warmId = uuid6(-1)
    await invoke(graph, warmId)
    for (const key of Object.keys(counts)) delete counts[key]
    const types = {}
    const hook = createHook({ init: (_id, type) => void (types[type] = (types[type] ?? 0) + 1) })
    hook.enable()
    await invoke(graph, WARM ? warmId : uuid6(-1))
    hook.disable()
    const show = (o) =>
      Object.entries(o)
        .filter(([t]) => t !== 'PROMISE')
        .map(([t, n]) => `${t} ${n}`)
        .join(', ')
    console.log(`   ${c.name}:\n     calls: ${show(counts)}\n     async resources: ${show(types)} (promises ${types.PROMISE ?? 0})`)
    await saver.close?.()
  }

  // ---- 2: time per super-step, interleaved ------------------------------------------------------
  const runs = contenders.map((c) => ({ ...c, graph: loopGraph(c.make().saver), thread: uuid6(-1), times: [] }))
  const round = async (r) => {
    const before = process.cpuUsage()
    const t0 = performance.now()
    for (let i = 0; i < INVOKES; i++) await invoke(r.graph, WARM ? r.thread : uuid6(-1))
    const cpu = process.cpuUsage(before)
    return { ms: (performance.now() - t0) / INVOKES / STEPS, cpu: (cpu.user + cpu.system) / 1000 / INVOKES / STEPS }
  }
  for (const r of runs) await round(r) // warm-up, untimed
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < runs.length; k++) {
      const r = runs[(i + k) % runs.length]
      r.times.push(await round(r))
    }
  }
  const memory = median(runs[0].times.map((t) => t.ms)) // the first contender: MemorySaver unless left out
  console.log(`2. time per super-step, ${INVOKES} invokes a round${WARM ? ' on one thread' : ', a new thread each'} (median of ${ROUNDS} rounds, min–max; CPU of the process per step)`)
  for (const r of runs) {
    const ms = r.times.map((t) => t.ms)
    const cpu = r.times.map((t) => t.cpu)
    const m = median(ms)
    console.log(
      `   ${r.name.padEnd(28)} ${m.toFixed(3)} ms (${Math.min(...ms).toFixed(3)}–${Math.max(...ms).toFixed(3)})  +${(m - memory).toFixed(3)} ms over ${runs[0].name}  cpu ${median(cpu).toFixed(3)} ms`,
    )
  }
  // ---- 3: the control's trip alone -------------------------------------------------------------
  const trips = []
  for (let i = 0; i < ROUNDS; i++) {
    const before = process.cpuUsage()
    const t0 = performance.now()
    for (let k = 0; k < 500; k++) await new Promise((res, rej) => fstat(fd, (e) => (e ? rej(e) : res())))
    const cpu = process.cpuUsage(before)
    trips.push({ us: ((performance.now() - t0) * 1000) / 500, cpu: (cpu.user + cpu.system) / 500 })
  }
  console.log(
    `3. the control's fstat trip timed alone (awaited in a loop, median of ${ROUNDS} rounds of 500): ${median(trips.map((t) => t.us)).toFixed(1)} µs, cpu ${median(trips.map((t) => t.cpu)).toFixed(1)} µs`,
  )
} finally {
  cleanup(root)
}
