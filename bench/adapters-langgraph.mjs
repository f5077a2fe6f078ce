// LangGraph checkpointers, same run, same graph:
// 1. time per super-step of a 20-super-step StateGraph run with durability 'sync', for
//    SessionCheckpointSaver over JSONL, MemorySaver and LangGraph's SqliteSaver (installed by
//    the bench into bench/.work/, never by `npm install`): medians of interleaved rounds;
//    Raw controls in the same rounds: a write + fdatasync per super-step of the bytes one of the
//    saver's super-steps appends, through the thread pool (as the JSONL backend does) and as
//    synchronous calls on the main thread (as better-sqlite3 does), each timed alone.
// 2. getTuple of the latest checkpoint of a 10,000-checkpoint thread after a restart (a fresh
//    process each round): its time, and the heap the thread's index holds afterwards.
//    Two more controls run inside LangGraph: MemorySaver whose put first makes one write of those
//    bytes through the thread pool (unsynced; and on an O_DSYNC descriptor, durable): the floor
//    of a saver that waits for one write a super-step, with what LangGraph itself does around a
//    step that waits for the thread pool (the raw controls, timed alone, leave that out).
// Usage: npm run build && node --expose-gc bench/adapters-langgraph.mjs [--rounds N] [--checkpoints N]
//   (SPJ_BENCH_DIST=<dir> for a build other than dist/)
import { execFileSync } from 'node:child_process'
import { closeSync, constants, fdatasync, fdatasyncSync, openSync, readdirSync, statSync, write, writeSync } from 'node:fs'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { MemorySaver, uuid6 } from '@langchain/langgraph-checkpoint'
import { Annotation, END, START, StateGraph } from '@langchain/langgraph'
// SPJ_BENCH_DIST=<dir> measures a build other than dist/ (e.g. a private one).
const DIST = process.env.SPJ_BENCH_DIST ? `${pathToFileURL(resolve(process.env.SPJ_BENCH_DIST)).href}/` : new URL('../dist/', import.meta.url).href
const { SessionCheckpointSaver, threadSessionId } = await import(`${DIST}adapters/langgraph/index.js`)
const { ThreadIndex } = await import(`${DIST}adapters/langgraph/thread-index.js`)
const { createJsonlPersistence } = await import(`${DIST}index.js`)
import { loadSqliteSaver } from './scenarios/langgraph-sqlite-install.mjs'

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const ROUNDS = Math.max(5, arg('rounds', 9))
const CHECKPOINTS = arg('checkpoints', 10_000)
const STEPS = 20
const SELF = fileURLToPath(import.meta.url)

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const fmt = (ms) => `${ms.toFixed(3)} ms`

/** A graph whose one node runs STEPS times: one super-step each, one put and one putWrites each. */
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

async function perStep(graph, durability) {
  const t0 = performance.now()
  const out = await graph.invoke({ count: 0 }, { configurable: { thread_id: uuid6(-1) }, durability, recursionLimit: STEPS + 5 })
  const ms = performance.now() - t0
  if (out.count !== STEPS) throw new Error(`the graph ran ${out.count} steps`)
  return ms / STEPS
}

/** Bytes in the logs under `dir` (recursively). */
function logBytes(dir) {
  let n = 0
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) if (e.isFile() && e.name.endsWith('.jsonl')) n += statSync(join(e.parentPath ?? e.path, e.name)).size
  return n
}

/**
 * A raw control: STEPS writes of `bytes`, each followed by fdatasync (`blocking`: as synchronous
 * calls; `'dsync'`: one write through the thread pool on a descriptor opened with O_DSYNC, the
 * write and its data sync in one call, the cheapest durable write the contract allows); ms per step.
 */
async function rawSteps(path, bytes, blocking) {
  const buf = Buffer.alloc(bytes, 'x')
  const fd = openSync(path, blocking === 'dsync' ? constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_DSYNC : 'a')
  try {
    const t0 = performance.now()
    for (let i = 0; i < STEPS; i++) {
      if (blocking === 'dsync') {
        await new Promise((res, rej) => write(fd, buf, (e) => (e ? rej(e) : res())))
      } else if (blocking) {
        writeSync(fd, buf)
        fdatasyncSync(fd)
      } else {
        await new Promise((res, rej) => write(fd, buf, (e) => (e ? rej(e) : res())))
        await new Promise((res, rej) => fdatasync(fd, (e) => (e ? rej(e) : res())))
      }
    }
    return (performance.now() - t0) / STEPS
  } finally {
    closeSync(fd)
  }
}

/** The bytes a control saver writes a put: set to what one of the saver's super-steps appends once it is known. */
let controlBytes = Buffer.alloc(1573, 'x')

/** MemorySaver whose put first makes one write of `controlBytes` (on an O_DSYNC descriptor when `dsync`) through the thread pool. */
function writingMemorySaver(path, dsync) {
  const fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | (dsync ? constants.O_DSYNC : 0))
  return new (class extends MemorySaver {
    async put(...args) {
      await new Promise((res, rej) => write(fd, controlBytes, (e) => (e ? rej(e) : res())))
      return super.put(...args)
    }
  })()
}

// ---- 2, the probe: run in a fresh process by the parent ----------------------------------------
if (process.argv[2] === '--probe') {
  const root = process.argv[3]
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: Infinity })
  const t0 = performance.now()
  const tuple = await saver.getTuple({ configurable: { thread_id: 'long' } })
  const ms = performance.now() - t0
  const t1 = performance.now()
  await saver.getTuple({ configurable: { thread_id: 'long' } })
  const warmMs = performance.now() - t1
  globalThis.gc?.()
  const heap = process.memoryUsage().heapUsed - before
  await saver.close()
  // The index alone: built from a lock-free read, nothing of the backend kept open.
  let loaded = await createJsonlPersistence({ root }).inspect(threadSessionId('long'))
  globalThis.gc?.()
  const base = process.memoryUsage().heapUsed
  const index = ThreadIndex.fromEvents(loaded.events, 'long')
  loaded = undefined
  globalThis.gc?.()
  const indexHeap = process.memoryUsage().heapUsed - base
  if (index.count === 0) throw new Error('the index is empty') // and alive until measured
  process.stdout.write(JSON.stringify({ ms, warmMs, heap, indexHeap: Math.max(0, indexHeap), step: tuple?.metadata?.step }))
  process.exit(0)
}

// ---- 1 ------------------------------------------------------------------------------------------
const root = await mkdtemp(join(tmpdir(), 'spj-bench-lg-'))
try {
  const SqliteSaver = await loadSqliteSaver()
  const contenders = [
    ['SessionCheckpointSaver, JSONL (sync data)', () => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: join(root, 'jsonl') }) })],
    ['SessionCheckpointSaver, JSONL (sync data, dsyncWrites)', () => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: join(root, 'jsonl-dsync'), dsyncWrites: true }) })],
    ['SessionCheckpointSaver, JSONL (sync none)', () => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: join(root, 'jsonl-none'), sync: 'none' }) })],
    ['MemorySaver', () => new MemorySaver()],
    ['MemorySaver + one write a put (thread pool)', () => writingMemorySaver(join(root, 'control-write'), false)],
    ['MemorySaver + one O_DSYNC write a put (thread pool)', () => writingMemorySaver(join(root, 'control-dsync'), true)],
  ]
  let sqliteSync = ''
  if (SqliteSaver) {
    contenders.push(['SqliteSaver (its defaults: WAL)', () => SqliteSaver.fromConnString(join(root, 'default.db'))])
    contenders.push([
      'SqliteSaver (WAL, synchronous=FULL)',
      () => {
        const s = SqliteSaver.fromConnString(join(root, 'full.db'))
        // The saver sets WAL when first used; FULL makes each commit wait for its fsync, as the JSONL appends do.
        s.setup?.()
        s.db.pragma('synchronous = FULL')
        return s
      },
    ])
    const probe = SqliteSaver.fromConnString(join(root, 'probe.db'))
    probe.setup?.()
    sqliteSync = `SqliteSaver's defaults here: journal_mode=${probe.db.pragma('journal_mode', { simple: true })}, synchronous=${probe.db.pragma('synchronous', { simple: true })} (0 off, 1 normal: no fsync per commit in WAL, 2 full)`
  }
  const graphs = contenders.map(([name, make]) => ({ name, graph: loopGraph(make()) }))
  // What one super-step of the saver appends: its log after one run, over the run's appends
  // (the input's, the first checkpoint's, then one a super-step).
  await perStep(graphs[0].graph, 'sync')
  const stepBytes = Math.round(logBytes(join(root, 'jsonl')) / (STEPS + 2))
  controlBytes = Buffer.alloc(stepBytes, 'x')
  const raws = [
    { name: `raw write + fdatasync, ${stepBytes} B (thread pool)`, run: () => rawSteps(join(root, 'raw-async'), stepBytes, false) },
    { name: `raw writeSync + fdatasyncSync, ${stepBytes} B (main thread)`, run: () => rawSteps(join(root, 'raw-sync'), stepBytes, true) },
    { name: `raw O_DSYNC write, ${stepBytes} B (thread pool)`, run: () => rawSteps(join(root, 'raw-dsync'), stepBytes, 'dsync') },
  ]
  for (const [n, durability] of [['1', 'sync'], ['1b', 'async']]) {
    const all = durability === 'sync' ? [...graphs.map((g) => ({ name: g.name, run: () => perStep(g.graph, durability) })), ...raws] : graphs.map((g) => ({ name: g.name, run: () => perStep(g.graph, durability) }))
    const times = all.map(() => [])
    for (const c of all) await c.run() // warm-up round, untimed
    for (let r = 0; r < ROUNDS; r++) {
      // Rotate the order each round: the machine is shared and noisy.
      for (let i = 0; i < all.length; i++) {
        const k = (i + r) % all.length
        times[k].push(await all[k].run())
      }
    }
    console.log(`${n}. ${STEPS}-super-step StateGraph, durability '${durability}', time per super-step (median of ${ROUNDS} rounds, min–max)`)
    const sqlite = graphs.findIndex((g) => g.name.startsWith('SqliteSaver (its'))
    const sqliteFull = graphs.findIndex((g) => g.name.startsWith('SqliteSaver (WAL, synchronous=FULL'))
    all.forEach((g, k) => {
      const m = median(times[k])
      const vs = [sqlite, sqliteFull].filter((i) => i >= 0).map((i) => `${(m / median(times[i])).toFixed(2)}× ${i === sqlite ? 'SQLite default' : 'SQLite FULL'}`)
      console.log(`   ${g.name.padEnd(55)} ${fmt(m).padStart(10)}  (${fmt(Math.min(...times[k]))}–${fmt(Math.max(...times[k]))})  ${vs.join(', ')}`)
    })
    const memory = all.findIndex((g) => g.name === 'MemorySaver')
    const raw = all.findIndex((g) => g.name.startsWith('raw write + fdatasync'))
    if (raw >= 0 && memory >= 0 && sqlite >= 0) {
      // The floor of a saver that makes one synced write a super-step through the thread pool:
      // LangGraph's own cost (MemorySaver) plus that write, each round's pair summed.
      const floor = times[memory].map((t, r) => t + times[raw][r])
      console.log(`   floor: MemorySaver + raw write + fdatasync, per round${' '.repeat(5)} ${fmt(median(floor)).padStart(10)}  ${(median(floor) / median(times[sqlite])).toFixed(2)}× SQLite default, ${(median(floor) / median(times[sqliteFull])).toFixed(2)}× SQLite FULL`)
    }
    const dsync = all.findIndex((g) => g.name.startsWith('raw O_DSYNC write'))
    if (dsync >= 0 && memory >= 0 && sqlite >= 0) {
      // The lowest floor of a saver whose put resolves once durable without blocking the event
      // loop (SPEC §14, §5): LangGraph's own cost plus one O_DSYNC write a super-step.
      const floor = times[memory].map((t, r) => t + times[dsync][r])
      console.log(`   floor: MemorySaver + raw O_DSYNC write, per round${' '.repeat(6)} ${fmt(median(floor)).padStart(10)}  ${(median(floor) / median(times[sqlite])).toFixed(2)}× SQLite default, ${(median(floor) / median(times[sqliteFull])).toFixed(2)}× SQLite FULL`)
    }
  }
  if (sqliteSync) console.log(`   ${sqliteSync}`)

  // ---- 2 ----------------------------------------------------------------------------------------
  const longRoot = join(root, 'long')
  const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: longRoot, sync: 'none' }) })
  let config = { configurable: { thread_id: 'long', checkpoint_ns: '' } }
  for (let i = 1; i <= CHECKPOINTS; i++) {
    const checkpoint = {
      v: 4,
      id: uuid6(-1),
      ts: new Date().toISOString(),
      channel_values: { count: i, note: `step ${i}: ${'x'.repeat(120)}`, 'branch:to:step': null },
      channel_versions: { __start__: 1, count: i + 1, note: i + 1, 'branch:to:step': i + 1 },
      versions_seen: { step: { 'branch:to:step': i } },
    }
    config = await writer.put(config, checkpoint, { source: 'loop', step: i, parents: {} }, { count: i + 1, note: i + 1, 'branch:to:step': i + 1 })
    await writer.putWrites(config, [['count', i + 1], ['note', `step ${i + 1}: ${'x'.repeat(120)}`], ['branch:to:step', null]], `task-${i}`, '~__pregel_pull, step')
  }
  await writer.close()
  const logPath = createJsonlPersistence({ root: longRoot }).locate({ id: 'langgraph:long', createdAt: 0, delegationDepth: 0 }).path
  const size = (await stat(logPath)).size
  const probes = []
  for (let r = 0; r < Math.max(5, Math.min(ROUNDS, 7)); r++) {
    probes.push(JSON.parse(execFileSync(process.execPath, ['--expose-gc', SELF, '--probe', longRoot], { encoding: 'utf8' })))
  }
  if (probes.some((p) => p.step !== CHECKPOINTS)) throw new Error('the probe did not get the latest checkpoint')
  console.log(`2. getTuple of the latest checkpoint of a ${CHECKPOINTS}-checkpoint thread (log ${(size / 2 ** 20).toFixed(1)} MiB, ${CHECKPOINTS * 2} appends) after a restart, fresh process each (median of ${probes.length}, min–max)`)
  const ms = probes.map((p) => p.ms)
  const heap = probes.map((p) => p.heap)
  console.log(`   first getTuple (one read of the log, index built): ${fmt(median(ms))} (${fmt(Math.min(...ms))}–${fmt(Math.max(...ms))})`)
  console.log(`   next getTuple (from the index):                    ${fmt(median(probes.map((p) => p.warmMs)))}`)
  const indexHeap = probes.map((p) => p.indexHeap)
  console.log(`   heap held with the thread open (index + backend):  ${(median(heap) / 2 ** 20).toFixed(1)} MiB`)
  console.log(`   heap held by the index alone:                      ${(median(indexHeap) / 2 ** 20).toFixed(1)} MiB (${(median(indexHeap) / CHECKPOINTS).toFixed(0)} bytes a checkpoint; the log holds ${(size / CHECKPOINTS).toFixed(0)})`)
} finally {
  await rm(root, { recursive: true, force: true })
}
