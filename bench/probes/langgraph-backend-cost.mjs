// The JSONL backend's share of SessionCheckpointSaver's cost in bench/adapters-langgraph.mjs's
// pattern, without LangGraph: what the saver asks of the backend for one invoke of a
// 20-super-step graph on a new thread (a `load` that finds no log, a `create`, 22 appends of
// one turn each, ~1.6 KB; the thread left open), phase by phase: wall time and the process's
// CPU time (the thread pool's included), median of interleaved rounds (min–max).
// Then (`--trace`, one thread) the file-system calls each phase makes, through a wrapped `fs`.
// Usage: node bench/probes/langgraph-backend-cost.mjs [--rounds N] [--threads N] [--sync data,dsync,none] [--trace]
//   SPJ_BENCH_DIST=<dist>[,<dist>…] (default dist/); BENCH_DIR for the scratch space.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { cleanup, median, scratch } from '../lib.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1]
}
const ROUNDS = Math.max(5, Number(arg('rounds', 9)))
const THREADS = Number(arg('threads', 20))
const SYNCS = String(arg('sync', 'data,dsync,none')).split(',')
const APPENDS = 22
const dists = (process.env.SPJ_BENCH_DIST ?? new URL('../../dist/', import.meta.url).pathname).split(',').map((d) => resolve(d))

const note = 'x'.repeat(1200)
/** One append as the saver makes it: a turn around one checkpoint-sized event. */
const batch = (seq, turn) => [
  { seq, type: 'turn/start', time: 1, data: { turn } },
  { seq: seq + 1, type: 'langgraph/checkpoint', time: 1, data: { ns: '', id: `c${turn}`, note } },
  { seq: seq + 2, type: 'turn/end', time: 1, data: { turn, reason: { kind: 'completed' } } },
]

/** A `--sync` name as the backend's configuration: 'dsync' is `sync: 'data'` with `dsyncWrites`. */
const config = (name) => (name === 'dsync' ? { sync: 'data', dsyncWrites: true } : { sync: name })

const PHASES = ['load (absent)', 'create', 'first append', 'next appends (each)', 'close']
const root = scratch('langgraph-backend-cost')

/** A file system that logs each call (and each call on a handle it opened) into `log`. */
function tracing(base, log) {
  const wrapHandle = (h) =>
    new Proxy(h, {
      get(target, key) {
        const v = Reflect.get(target, key)
        if (typeof v !== 'function') return v
        return (...args) => {
          log.push(`handle.${String(key)}`)
          return v.apply(target, args)
        }
      },
    })
  return new Proxy(base, {
    get(target, key) {
      const v = Reflect.get(target, key)
      if (typeof v !== 'function') return v
      return (...args) => {
        log.push(String(key))
        const out = v.apply(target, args)
        return key === 'open' ? out.then(wrapHandle) : out
      }
    },
  })
}

try {
  if (process.argv.includes('--trace')) {
    const { createJsonlPersistence, createNodeFileSystem } = await import(`${pathToFileURL(dists[0]).href}/index.js`)
    for (const sync of SYNCS) {
      const log = []
      const p = createJsonlPersistence({ root: `${root}/trace-${sync}`, ...config(sync), fs: tracing(createNodeFileSystem(), log) })
      // A first thread, so that the root, the bucket and the lock directory exist, as in a running saver.
      await p.create({ id: 'first', createdAt: 1, delegationDepth: 0 })
      await p.append('first', batch(0, 1))
      const id = 'langgraph:traced'
      const calls = []
      const phase = async (name, fn) => {
        log.length = 0
        await fn()
        calls.push(`    ${name.padEnd(14)} ${log.length}: ${log.join(', ')}`)
      }
      await phase('load (absent)', () => p.load(id).catch((e) => void (e.code === 'E_NOT_FOUND' || Promise.reject(e))))
      await phase('create', () => p.create({ id, createdAt: 1, delegationDepth: 0 }))
      await phase('first append', () => p.append(id, batch(0, 1)))
      await phase('next append', () => p.append(id, batch(3, 2)))
      await phase('close', () => p.close(id))
      console.log(`file-system calls, sync '${sync}' (each one a thread-pool trip):\n${calls.join('\n')}`)
    }
  }
  const contenders = []
  for (const [k, dist] of dists.entries()) {
    const { createJsonlPersistence } = await import(`${pathToFileURL(dist).href}/index.js`)
    for (const sync of SYNCS) {
      const p = createJsonlPersistence({ root: `${root}/${k}-${sync}`, ...config(sync) })
      contenders.push({ name: `${dists.length > 1 ? `build ${String.fromCharCode(65 + k)}, ` : ''}sync '${sync}'`, p, n: 0, times: PHASES.map(() => []) })
    }
  }
  const timed = async (fn) => {
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    await fn()
    const c = process.cpuUsage(c0)
    return [performance.now() - t0, (c.user + c.system) / 1000]
  }
  const round = async (c) => {
    const sums = PHASES.map(() => [0, 0])
    const add = (i, [ms, cpu], per = 1) => {
      sums[i][0] += ms / per
      sums[i][1] += cpu / per
    }
    for (let t = 0; t < THREADS; t++) {
      const id = `langgraph:t${c.n++}`
      add(
        0,
        await timed(() =>
          c.p.load(id).then(
            () => {
              throw new Error('found')
            },
            (e) => {
              if (e.code !== 'E_NOT_FOUND') throw e
            },
          ),
        ),
      )
      add(1, await timed(() => c.p.create({ id, createdAt: 1, delegationDepth: 0, 'langgraph.thread': id })))
      add(2, await timed(() => c.p.append(id, batch(0, 1))))
      add(
        3,
        await timed(async () => {
          for (let a = 1; a < APPENDS; a++) await c.p.append(id, batch(a * 3, a + 1))
        }),
        APPENDS - 1,
      )
      add(4, await timed(() => c.p.close(id)))
    }
    return sums.map(([ms, cpu]) => [ms / THREADS, cpu / THREADS])
  }
  for (const c of contenders) await round(c) // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(r + k) % contenders.length]
      const res = await round(c)
      res.forEach((x, i) => c.times[i].push(x))
    }
  }
  console.log(`The backend's calls for one invoke on a new thread, per call (median of ${ROUNDS} rounds of ${THREADS} threads, min–max): wall ms, cpu ms`)
  for (const c of contenders) {
    console.log(`  ${c.name}`)
    PHASES.forEach((name, i) => {
      const ms = c.times[i].map((x) => x[0])
      const cpu = c.times[i].map((x) => x[1])
      console.log(`    ${name.padEnd(22)} ${median(ms).toFixed(3)} ms (${Math.min(...ms).toFixed(3)}–${Math.max(...ms).toFixed(3)})  cpu ${median(cpu).toFixed(3)} ms`)
    })
    const total = c.times[0].map((_, r) => c.times[0][r][0] + c.times[1][r][0] + c.times[2][r][0] + (APPENDS - 1) * c.times[3][r][0])
    const cpuTotal = c.times[0].map((_, r) => c.times[0][r][1] + c.times[1][r][1] + c.times[2][r][1] + (APPENDS - 1) * c.times[3][r][1])
    console.log(`    an invoke's calls (close aside), per super-step of 20: ${(median(total) / 20).toFixed(3)} ms, cpu ${(median(cpuTotal) / 20).toFixed(3)} ms`)
  }
} finally {
  cleanup(root)
}
