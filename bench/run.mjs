// `npm run bench [-- --quick]`: every figure is a median over >= 5 runs; every ratio is computed
// within one run (both sides measured back to back), so machine noise cancels. Writes bench/results.json.
import { execFileSync } from 'node:child_process'
import { statSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'
import { appendRun } from './scenarios/append.mjs'
import { concurrentRun } from './scenarios/concurrent.mjs'
import { packageWriteModes } from './scenarios/dsync-config.mjs'
import { materializeRun } from './scenarios/new-session.mjs'
import { listRun, loadRun, lockRun, makeBigFixture, makeLoadFixture, peakRss, verifyRun } from './scenarios/load-list-lock.mjs'
import { endToEndRun, handlerRun } from './scenarios/plugin.mjs'
import { growthRun, noSyncRun, sqliteAppendRun, sqliteLoadRun } from './scenarios/alternatives.mjs'
import { loadSqlite } from './scenarios/sqlite-install.mjs'
import { stats } from './lib.mjs'

const started = Date.now()
const quick = process.argv.includes('--quick')
const noSqlite = process.argv.includes('--no-sqlite')
const RUNS = quick ? 5 : 7
const rows = []
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))

/**
 * Records a figure: `values` (one per run), its unit, and its targets: one like ['<=', 1.2] or a
 * list of them; a third element 'stretch' marks a stretch goal (reported, never a missed target).
 */
function record(name, values, unit, targets = []) {
  const s = stats(values)
  const list = (Array.isArray(targets[0]) ? targets : targets.length > 0 ? [targets] : []).map(([op, value, kind]) => ({
    op,
    value,
    stretch: kind === 'stretch',
    met: op === '<=' ? s.median <= value : s.median >= value,
  }))
  const main = list.filter((t) => !t.stretch)
  const stretch = list.filter((t) => t.stretch)
  rows.push({
    name,
    unit,
    ...s,
    target: main.map((t) => `${t.op} ${t.value}`).join(', '),
    met: main.length > 0 ? main.every((t) => t.met) : undefined,
    stretchTarget: stretch.map((t) => `${t.op} ${t.value}`).join(', '),
    stretchMet: stretch.length > 0 ? stretch.every((t) => t.met) : undefined,
  })
  const t = list.map((x) => `  ${x.stretch ? 'stretch' : 'target'} ${x.op} ${x.value} ${x.met ? 'MET' : 'NOT MET'}`).join('')
  console.log(`${name.padEnd(58)} ${fmt(s.median).padStart(9)} ${unit.padEnd(9)} (min ${fmt(s.min)}, max ${fmt(s.max)})${t}`)
}

/** Every scenario starts on a settled disk: earlier fixtures' dirty pages are written back first. */
async function settle() {
  execFileSync('sync')
  await new Promise((r) => setTimeout(r, quick ? 150 : 500))
}

async function repeat(fn) {
  await settle()
  const out = []
  for (let i = 0; i < RUNS; i++) out.push(await fn(i))
  return out
}
const col = (runs, f) => runs.map(f)

console.log(`session-persistence-jsonl benchmarks (${quick ? 'quick' : 'full'}; ${RUNS} runs each; node ${process.version}; ${cpus().length} × ${cpus()[0]?.model}; ${(totalmem() / 2 ** 30).toFixed(0)} GiB)`)
// Before anything is timed: a first run compiles better-sqlite3, which would disturb the figures.
const Database = noSqlite ? undefined : loadSqlite()
const modes = packageWriteModes()
const MODE = { pair: 'write + fdatasync', dsync: 'O_DSYNC' }
console.log(`package appends: ${modes.dsync ? `both modes measured (write + fdatasync: ${JSON.stringify(modes.pair)}; O_DSYNC: ${JSON.stringify(modes.dsync)}); the default is ${MODE[modes.defaultMode]}` : 'this build has no O_DSYNC mode; only the raw O_DSYNC writer and floor are measured'}`)
console.log()
// The package's contender in its default mode, and the same for the sixteen sessions.
const dflt = (r) => (modes.defaultMode === 'dsync' ? r.pkgDsync : r.pkg)
const DEFAULT = `package (default, ${MODE[modes.defaultMode]})`

for (const size of [1, 10, 100]) {
  const runs = await repeat(() => appendRun(size, quick ? 60 : 200, modes))
  const b = `append batch ${size}`
  const at10 = (target) => (size === 10 ? target : [])
  record(`${b}: package (write + fdatasync), ms per batch`, col(runs, (r) => r.pkg), 'ms')
  if (modes.dsync) record(`${b}: package (O_DSYNC), ms per batch`, col(runs, (r) => r.pkgDsync), 'ms')
  record(`${b}: raw FileHandle write+fdatasync, ms`, col(runs, (r) => r.asyncRaw), 'ms')
  record(`${b}: raw callback write+fdatasync, ms`, col(runs, (r) => r.callbackRaw), 'ms')
  record(`${b}: raw O_DSYNC write (callback), ms`, col(runs, (r) => r.dsyncRaw), 'ms')
  record(`${b}: raw writeSync+fdatasyncSync, ms`, col(runs, (r) => r.syncRaw), 'ms')
  record(`${b}: ${DEFAULT} / raw non-blocking`, col(runs, (r) => dflt(r) / r.asyncRaw), '×', at10([
    ['<=', 1.2],
    ...(modes.defaultMode === 'dsync' ? [['<=', 1.0, 'stretch']] : []),
  ]))
  record(`${b}: ${DEFAULT} / raw synchronous`, col(runs, (r) => dflt(r) / r.syncRaw), '×')
  record(`${b}: protocol floor (serialize, lease, write, fdatasync) / raw non-blocking`, col(runs, (r) => r.floor / r.asyncRaw), '×')
  record(`${b}: O_DSYNC protocol floor (serialize, lease, one write) / raw non-blocking`, col(runs, (r) => r.floorDsync / r.asyncRaw), '×')
  record(`${b}: raw O_DSYNC write / raw non-blocking`, col(runs, (r) => r.dsyncRaw / r.asyncRaw), '×')
  if (modes.defaultMode !== 'pair' || modes.dsync) {
    record(`${b}: package (write + fdatasync) / raw non-blocking`, col(runs, (r) => r.pkg / r.asyncRaw), '×')
  }
  record(`${b}: package (write + fdatasync) / protocol floor`, col(runs, (r) => r.pkg / r.floor), '×')
  if (modes.dsync) {
    if (modes.defaultMode !== 'dsync') {
      record(`${b}: package (O_DSYNC) / raw non-blocking`, col(runs, (r) => r.pkgDsync / r.asyncRaw), '×', at10(['<=', 1.0, 'stretch']))
    }
    record(`${b}: package (O_DSYNC) / raw O_DSYNC write`, col(runs, (r) => r.pkgDsync / r.dsyncRaw), '×')
    record(`${b}: package (O_DSYNC) / O_DSYNC protocol floor`, col(runs, (r) => r.pkgDsync / r.floorDsync), '×')
  }
  if (size === 100) {
    record(`append batch 100: ${DEFAULT} throughput vs stringify+write+fdatasync`, col(runs, (r) => r.stringify / dflt(r)), '×', ['>=', 0.85])
  }
}

if (Database) {
  for (const size of [1, 10, 100]) {
    const runs = await repeat(() => sqliteAppendRun(Database, size, quick ? 40 : 150))
    record(`SQLite WAL synchronous=FULL, batch ${size}: ms per batch`, col(runs, (r) => r.sqlite), 'ms')
    record(`package / SQLite WAL FULL, batch ${size}`, col(runs, (r) => r.pkg / r.sqlite), '×', size === 10 ? ['<=', 1] : undefined)
  }
} else {
  console.log(`SQLite: ${noSqlite ? '--no-sqlite' : 'better-sqlite3 unavailable (see above)'}; SQLite rows skipped`)
}
const nosync = await repeat(() => noSyncRun(10, quick ? 100 : 300))
record("sync 'none' batch 10 / appendFileSync without sync", col(nosync, (r) => r.pkg / r.raw), '×')
const growth = await repeat(() => growthRun(quick ? 30 : 100, quick ? 2 : 4)) // whole-file saves at 50k: ~0.3 s each
record('growth: package per batch at 50k events / at 1k', col(growth, (r) => r.pkgAt50k / r.pkgAt1k), '×', ['<=', 1.2])
record('growth: whole-file rewrite per save at 50k / at 1k', col(growth, (r) => r.rewriteAt50k / r.rewriteAt1k), '×')
record('whole-file rewrite at 50k events: ms per save', col(growth, (r) => r.rewriteAt50k), 'ms')
record('whole-file rewrite at 50k / package append at 50k', col(growth, (r) => r.rewriteAt50k / r.pkgAt50k), '×')

// Sixteen sessions, then the same in a child process with UV_THREADPOOL_SIZE=16: libuv runs every
// non-blocking file call on a pool of 4 threads unless the host sets the variable before the pool
// starts, and sixteen syncs in flight need more than 4.
const concCount = quick ? 30 : 100
const conc = await repeat(() => concurrentRun(16, concCount, modes))
await settle()
const pooled = JSON.parse(
  execFileSync(process.execPath, [fileURLToPath(new URL('./scenarios/concurrent-pool.mjs', import.meta.url)), String(RUNS), String(concCount), JSON.stringify(modes)], {
    env: { ...process.env, UV_THREADPOOL_SIZE: '16' },
    encoding: 'utf8',
  }),
)
for (const [label, runs] of [['16 sessions', conc], ['16 sessions, UV_THREADPOOL_SIZE=16', pooled]]) {
  const target = label === '16 sessions' ? ['>=', 0.9] : undefined
  record(`${label}: ${DEFAULT} events/s`, col(runs, dflt), 'ev/s')
  record(`${label}: raw non-blocking writers events/s`, col(runs, (r) => r.asyncRaw), 'ev/s')
  record(`${label}: ${DEFAULT} / 16 raw non-blocking writers`, col(runs, (r) => dflt(r) / r.asyncRaw), '×', target)
  record(`${label}: 16 protocol floors / 16 raw non-blocking`, col(runs, (r) => r.floor / r.asyncRaw), '×')
  record(`${label}: package (write + fdatasync) / 16 protocol floors`, col(runs, (r) => r.pkg / r.floor), '×')
  record(`${label}: 16 raw O_DSYNC writers / 16 raw non-blocking`, col(runs, (r) => r.dsyncRaw / r.asyncRaw), '×')
  if (modes.dsync) {
    const other = modes.defaultMode === 'dsync' ? ['pkg', 'write + fdatasync'] : ['pkgDsync', 'O_DSYNC']
    record(`${label}: package (${other[1]}) / 16 raw non-blocking`, col(runs, (r) => r[other[0]] / r.asyncRaw), '×')
  }
  // For scale only (the old target of 2× one synchronous writer is retired: on libuv's 4
  // threads raw non-blocking writers themselves reach only 1.5–1.7× it).
  record(`${label}: raw non-blocking writers / one synchronous writer`, col(runs, (r) => r.asyncRaw / r.syncRaw), '×')
  record(`${label}: ${DEFAULT} / one synchronous writer`, col(runs, (r) => dflt(r) / r.syncRaw), '×')
}

const mat = await repeat(() => materializeRun(quick ? 30 : 100, modes.defaultMode === 'dsync'))
record(`new session: ${DEFAULT} create + first append, ms`, col(mat, (r) => r.pkg), 'ms')
record(`new session: protocol floor (${MODE[modes.defaultMode]}), ms`, col(mat, (r) => r.floor), 'ms')
record('new session: package / protocol floor', col(mat, (r) => r.pkg / r.floor), '×', ['<=', 1.15])
// For scale (the absolute target of 1.3× is retired: the contract's own steps cost ~1.5×).
record('new session: protocol floor (contract §4.2, §5.1, §5.3 steps, overlapped) vs create+write+fdatasync+dir fsync', col(mat, (r) => r.floor / r.raw), '×')
record('new session: package create + first append vs the same', col(mat, (r) => r.pkg / r.raw), '×')
record('new session: the first append alone (materialization) vs the same', col(mat, (r) => r.firstAppend / r.raw), '×')

const fixture = makeLoadFixture(100_000)
try {
  const size = statSync(fixture.path).size
  const loads = await repeat(() => loadRun(fixture))
  record(`load 100k events (${(size / 2 ** 20).toFixed(1)} MiB): package, ms`, col(loads, (r) => r.pkg), 'ms')
  record('load 100k: throughput vs readFileSync+split+JSON.parse', col(loads, (r) => r.baseline / r.pkg), '×', ['>=', 0.9])
  const rss = await repeat(() => peakRss('package', fixture.root, fixture.path).peakAboveBaseline / size)
  record('load 100k: peak RSS above baseline / file size', rss, '×', ['<=', 2.5])
  const rssBase = await repeat(() => peakRss('baseline', fixture.root, fixture.path).peakAboveBaseline / size)
  record('load 100k: same for readFileSync+split+JSON.parse', rssBase, '×')
  if (Database) {
    const sq = await repeat(() => sqliteLoadRun(Database, fixture.root, 100_000))
    record('load 100k: throughput vs SQLite SELECT + JSON.parse', col(sq, (r) => r.sqlite / r.pkg), '×', ['>=', 1])
  }
} finally {
  fixture.cleanup()
}

if (!quick) {
  // A log over 1 GiB: readFileSync cannot hold it as one string, so the baseline is a streaming reader.
  const big = makeBigFixture(2_700_000)
  try {
    const size = statSync(big.path).size
    const runs = await repeat(() => ({ pkg: peakRss('package', big.root, big.path), stream: peakRss('stream', big.root, big.path) }))
    record(`load ${(size / 2 ** 30).toFixed(2)} GiB (2.7M events): package, ms`, col(runs, (r) => r.pkg.ms), 'ms')
    record('load > 1 GiB: throughput vs readline stream + JSON.parse', col(runs, (r) => r.stream.ms / r.pkg.ms), '×')
    record('load > 1 GiB: peak RSS above baseline / file size', col(runs, (r) => r.pkg.peakAboveBaseline / size), '×', ['<=', 2.5])
    record('load > 1 GiB: same for the readline stream', col(runs, (r) => r.stream.peakAboveBaseline / size), '×')
  } finally {
    big.cleanup()
  }
}

// Before list and verify: after they create and delete tens of thousands of files, creating
// files (what a lock does) runs ~2× slower on ext4 for about a minute.
const locks = await repeat(() => lockRun(quick ? 30 : 100))
record('load + append 10 + close, ms', col(locks, (r) => r.withLock), 'ms')
record('writer lock: what it adds to load + append + close', col(locks, (r) => r.ratio), '×', ['<=', 0.25])

const lists = await repeat(() => listRun(quick ? 1_000 : 10_000))
record(`list ${quick ? '1,000' : '10,000'} sessions, ms`, col(lists, (r) => r.ms), 'ms')
record('list: reads per file', col(lists, (r) => r.readsPerFile), 'reads', ['<=', 1])
record('list: bytes asked per read', col(lists, (r) => r.maxBytesPerRead), 'bytes', ['<=', 4096])

const verifies = await repeat(() => verifyRun(quick ? 300 : 10_000))
record(`verify ${quick ? '300' : '10,000'} sessions of 100 events, ms`, col(verifies, (r) => r.verifyMs), 'ms')
record('verify: throughput vs loading them one after another', col(verifies, (r) => r.ratio), '×', ['>=', 0.5])


const handler = await repeat(() => handlerRun(quick ? 50_000 : 100_000))
record('plugin session/event handler on the host call path', col(handler, (r) => r.nsPerEvent / 1000), 'µs/event', ['<=', 2])
record('  (eventemitter3 emit to a no-op listener, for scale)', col(handler, (r) => r.nsPerEventNoop / 1000), 'µs/event')
const e2e = await repeat(() => endToEndRun(quick ? 50 : 150))
record('plugin end to end: durable events/s vs direct append', col(e2e, (r) => r.ratio), '×', ['>=', 0.8])

writeFileSync(
  new URL('./results.json', import.meta.url),
  `${JSON.stringify({ date: new Date().toISOString(), mode: quick ? 'quick' : 'full', command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`, node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, writeModes: modes, rows }, null, 2)}\n`,
)
const missed = rows.filter((r) => r.met === false)
console.log()
console.log(missed.length === 0 ? 'All targets met.' : `Targets not met: ${missed.map((r) => r.name).join('; ')}`)
const stretchMissed = rows.filter((r) => r.stretchMet === false)
if (stretchMissed.length > 0) console.log(`Stretch goals not met: ${stretchMissed.map((r) => r.name).join('; ')}`)
console.log(`(${((Date.now() - started) / 1000).toFixed(0)} s)`)
