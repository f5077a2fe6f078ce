// The append path of two builds, A/B on the same machine in one process:
//
//   node bench/scenarios/append-ab.mjs <tree A> <tree B> [--runs N] [--config-a JSON] [--config-b JSON]
//
// --config-a/--config-b: extra configuration for that build's package in every measurement
// (e.g. --config-b '{"formatVersion":0}' to take a newer build's line format out of the comparison).
// Each tree is a checkout with its own build (`git worktree add <dir> <commit>`, then `npm ci` and
// `npm run build` there). Two measurements, both interleaved:
// - each tree's own bench/scenarios/append.mjs (batch of 10, 200 batches) and concurrent.mjs
//   (sixteen sessions, 100 batches each), run after run in the order A B, B A, A B…, each run
//   with its own raw writers, so that each build's figure and its ratio to raw come from one run;
// - direct: both builds' packages and a raw FileHandle writer as contenders of one interleaved
//   loop (batch by batch; for sixteen sessions, round by round), so that both see the same disk.
// - CPU: CPU time (user + system, every thread of the process) per batch of each build, in
//   blocks interleaved A, B, raw in a rotating order (bench/probes/append-cpu.mjs's method): far
//   less disturbed by other processes than wall time on a shared machine. With sync 'data' (one
//   session, sixteen sessions) and with sync 'none' (the package's own work, no disk wait).
// Prints, per figure, the median of B/A over the runs and its min–max.
import { execFileSync } from 'node:child_process'
import { open } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { cleanup, events, interleave, scratch, serialize, stats } from '../lib.mjs'

const args = process.argv.slice(2)
const valued = ['--runs', '--config-a', '--config-b']
const trees = args.filter((a, i) => !a.startsWith('--') && !valued.includes(args[i - 1])).map((t) => resolve(t))
if (trees.length !== 2) {
  console.error('usage: node bench/scenarios/append-ab.mjs <tree A> <tree B> [--runs N] [--config-a JSON] [--config-b JSON]')
  process.exit(2)
}
const opt = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined)
const RUNS = Math.max(5, Number(opt('--runs') ?? 11))
const [A, B] = await Promise.all(
  trees.map(async (dir, i) => {
    const url = (p) => pathToFileURL(join(dir, p)).href
    const head = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
    const extra = JSON.parse(opt(i === 0 ? '--config-a' : '--config-b') ?? '{}')
    const modes = (await import(url('bench/scenarios/dsync-config.mjs'))).packageWriteModes()
    return {
      head: Object.keys(extra).length ? `${head} with ${JSON.stringify(extra)}` : head,
      appendRun: (await import(url('bench/scenarios/append.mjs'))).appendRun,
      concurrentRun: (await import(url('bench/scenarios/concurrent.mjs'))).concurrentRun,
      modes: { ...modes, pair: { ...modes.pair, ...extra }, dsync: modes.dsync && { ...modes.dsync, ...extra } },
      createJsonlPersistence: (await import(url('dist/index.js'))).createJsonlPersistence,
    }
  }),
)
console.log(`append A/B: A = ${A.head}, B = ${B.head}; ${RUNS} runs of each; node ${process.version}`)
const settle = async () => {
  execFileSync('sync')
  await new Promise((r) => setTimeout(r, 500))
}
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))
const rows = []
function record(name, values, unit) {
  const s = stats(values)
  rows.push({ name, unit, ...s, values })
  console.log(`${name.padEnd(84)} ${fmt(s.median).padStart(9)} ${unit.padEnd(5)} (min ${fmt(s.min)}, max ${fmt(s.max)})`)
}

// 1. The existing scenarios, each build's own, alternating run by run.
const scen = { batch: [], sixteen: [] }
for (let i = 0; i < RUNS; i++) {
  const pair = {}
  for (const [name, t] of i % 2 ? [['B', B], ['A', A]] : [['A', A], ['B', B]]) {
    await settle()
    pair[name] = { batch: await t.appendRun(10, 200, t.modes) }
  }
  for (const [name, t] of i % 2 ? [['A', A], ['B', B]] : [['B', B], ['A', A]]) {
    await settle()
    pair[name].sixteen = await t.concurrentRun(16, 100, t.modes)
  }
  scen.batch.push({ A: pair.A.batch, B: pair.B.batch })
  scen.sixteen.push({ A: pair.A.sixteen, B: pair.B.sixteen })
  console.log(`  run ${i + 1}/${RUNS}: batch 10 A ${fmt(pair.A.batch.pkg)} ms, B ${fmt(pair.B.batch.pkg)} ms; 16 sessions A ${fmt(pair.A.sixteen.pkg)} ev/s, B ${fmt(pair.B.sixteen.pkg)} ev/s`)
}
const col = (list, f) => list.map(f)
record('append.mjs batch 10: A package (write + fdatasync), ms per batch', col(scen.batch, (r) => r.A.pkg), 'ms')
record('append.mjs batch 10: B package (write + fdatasync), ms per batch', col(scen.batch, (r) => r.B.pkg), 'ms')
record('append.mjs batch 10: A package / raw non-blocking (its run)', col(scen.batch, (r) => r.A.pkg / r.A.asyncRaw), '×')
record('append.mjs batch 10: B package / raw non-blocking (its run)', col(scen.batch, (r) => r.B.pkg / r.B.asyncRaw), '×')
record('append.mjs batch 10: B / A, ms per batch', col(scen.batch, (r) => r.B.pkg / r.A.pkg), '×')
record('append.mjs batch 10: B / A, each over raw of its run', col(scen.batch, (r) => r.B.pkg / r.B.asyncRaw / (r.A.pkg / r.A.asyncRaw)), '×')
if (A.modes.dsync && B.modes.dsync) {
  record('append.mjs batch 10: B / A, O_DSYNC mode, each over raw of its run', col(scen.batch, (r) => r.B.pkgDsync / r.B.asyncRaw / (r.A.pkgDsync / r.A.asyncRaw)), '×')
}
record('concurrent.mjs 16 sessions: A package events/s', col(scen.sixteen, (r) => r.A.pkg), 'ev/s')
record('concurrent.mjs 16 sessions: B package events/s', col(scen.sixteen, (r) => r.B.pkg), 'ev/s')
record('concurrent.mjs 16 sessions: A package / 16 raw non-blocking (its run)', col(scen.sixteen, (r) => r.A.pkg / r.A.asyncRaw), '×')
record('concurrent.mjs 16 sessions: B package / 16 raw non-blocking (its run)', col(scen.sixteen, (r) => r.B.pkg / r.B.asyncRaw), '×')
record('concurrent.mjs 16 sessions: B / A, events/s', col(scen.sixteen, (r) => r.B.pkg / r.A.pkg), '×')
record('concurrent.mjs 16 sessions: B / A, each over raw of its run', col(scen.sixteen, (r) => r.B.pkg / r.B.asyncRaw / (r.A.pkg / r.A.asyncRaw)), '×')

// 2. Direct: both packages and a raw writer in one interleaved loop.
const meta = (id) => ({ id, createdAt: 1_764_489_600_000, delegationDepth: 0 })
async function directBatch(count) {
  const dir = scratch('ab-batch')
  const closers = []
  try {
    const batches = Array.from({ length: count + 1 }, (_, b) => events(b * 10, 10))
    const pkg = async (t, name) => {
      const p = t.createJsonlPersistence({ root: join(dir, name), ...t.modes.pair })
      await p.create(meta('s'))
      await p.append('s', batches[0])
      closers.push(() => p.closeAll())
      return (i) => p.append('s', batches[i])
    }
    const h = await open(join(dir, 'raw'), 'a')
    closers.push(() => h.close())
    let pos = 0
    const buffers = batches.map(serialize)
    const total = await interleave([
      ['A', await pkg(A, 'a')],
      ['B', await pkg(B, 'b')],
      ['raw', async (i) => {
        await h.write(buffers[i], 0, buffers[i].length, pos)
        await h.datasync()
        pos += buffers[i].length
      }],
    ], count)
    return total
  } finally {
    for (const c of closers.reverse()) await c()
    cleanup(dir)
  }
}
async function directSixteen(rounds, chunk = 5) {
  const dir = scratch('ab-sixteen')
  const closers = []
  try {
    const ids = Array.from({ length: 16 }, (_, i) => `s${i}`)
    const batches = Array.from({ length: rounds * chunk + 1 }, (_, b) => events(b * 10, 10))
    const buffers = batches.map(serialize)
    const range = (r) => Array.from({ length: chunk }, (_, k) => (r - 1) * chunk + k + 1)
    const pkg = async (t, name) => {
      const p = t.createJsonlPersistence({ root: join(dir, name), ...t.modes.pair })
      for (const id of ids) {
        await p.create(meta(id))
        await p.append(id, batches[0])
      }
      closers.push(() => p.closeAll())
      return (r) => Promise.all(ids.map(async (id) => {
        for (const b of range(r)) await p.append(id, batches[b])
      }))
    }
    const handles = await Promise.all(ids.map((id) => open(join(dir, `raw-${id}`), 'a')))
    closers.push(() => Promise.all(handles.map((h) => h.close())))
    const pos = ids.map(() => 0)
    const total = await interleave([
      ['A', await pkg(A, 'a')],
      ['B', await pkg(B, 'b')],
      ['raw', (r) => Promise.all(handles.map(async (h, s) => {
        for (const b of range(r)) {
          await h.write(buffers[b], 0, buffers[b].length, pos[s])
          await h.datasync()
          pos[s] += buffers[b].length
        }
      }))],
    ], rounds)
    return total
  } finally {
    for (const c of closers.reverse()) await c()
    cleanup(dir)
  }
}
const direct = { batch: [], sixteen: [] }
for (let i = 0; i < RUNS; i++) {
  await settle()
  direct.batch.push(await directBatch(300))
  await settle()
  direct.sixteen.push(await directSixteen(40))
}
record('direct, batch 10: A package, ms per batch', col(direct.batch, (r) => r.A / 300), 'ms')
record('direct, batch 10: B package, ms per batch', col(direct.batch, (r) => r.B / 300), 'ms')
record('direct, batch 10: raw FileHandle write + datasync, ms per batch', col(direct.batch, (r) => r.raw / 300), 'ms')
record('direct, batch 10: B / A (time per batch)', col(direct.batch, (r) => r.B / r.A), '×')
record('direct, 16 sessions: B / A (events/s)', col(direct.sixteen, (r) => r.A / r.B), '×')
record('direct, 16 sessions: A / 16 raw (events/s)', col(direct.sixteen, (r) => r.raw / r.A), '×')
record('direct, 16 sessions: B / 16 raw (events/s)', col(direct.sixteen, (r) => r.raw / r.B), '×')

// 3. CPU per batch, blocks interleaved.
async function cpuBlocks(sessions, sync, blocks, chunk) {
  const dir = scratch(`ab-cpu-${sessions}-${sync}`)
  const closers = []
  try {
    const ids = Array.from({ length: sessions }, (_, i) => `s${i}`)
    const batches = Array.from({ length: blocks * chunk + 1 }, (_, b) => events(b * 10, 10))
    const buffers = batches.map(serialize)
    const range = (r) => Array.from({ length: chunk }, (_, k) => r * chunk + k + 1)
    const pkg = async (t, name) => {
      const p = t.createJsonlPersistence({ root: join(dir, name), sync, ...t.modes.pair })
      for (const id of ids) {
        await p.create(meta(id))
        await p.append(id, batches[0])
      }
      closers.push(() => p.closeAll())
      return (r) => Promise.all(ids.map(async (id) => {
        for (const b of range(r)) await p.append(id, batches[b])
      }))
    }
    const handles = await Promise.all(ids.map((id) => open(join(dir, `raw-${id}`), 'a')))
    closers.push(() => Promise.all(handles.map((h) => h.close())))
    const pos = ids.map(() => 0)
    const contenders = [
      ['A', await pkg(A, 'a')],
      ['B', await pkg(B, 'b')],
      ['raw', (r) => Promise.all(handles.map(async (h, s) => {
        for (const b of range(r)) {
          await h.write(buffers[b], 0, buffers[b].length, pos[s])
          if (sync !== 'none') await h.datasync()
          pos[s] += buffers[b].length
        }
      }))],
    ]
    const cpu = { A: [], B: [], raw: [] }
    for (let r = 0; r < blocks; r++) {
      for (let k = 0; k < contenders.length; k++) {
        const [name, run] = contenders[(r + k) % contenders.length]
        const before = process.cpuUsage()
        await run(r)
        const used = process.cpuUsage(before)
        cpu[name].push((used.user + used.system) / (sessions * chunk))
      }
    }
    return cpu
  } finally {
    for (const c of closers.reverse()) await c()
    cleanup(dir)
  }
}
for (const [label, sessions, sync, blocks, chunk] of [
  ['CPU, batch 10, one session, sync data', 1, 'data', Math.max(24, 2 * RUNS), 200],
  ['CPU, batch 10, 16 sessions, sync data', 16, 'data', Math.max(24, 2 * RUNS), 25],
  ["CPU, batch 10, one session, sync 'none' (the package's own work)", 1, 'none', Math.max(24, 2 * RUNS), 400],
]) {
  await settle()
  const cpu = await cpuBlocks(sessions, sync, blocks, chunk)
  record(`${label}: A, µs per batch (median of ${blocks} blocks)`, cpu.A, 'µs')
  record(`${label}: B, µs per batch`, cpu.B, 'µs')
  record(`${label}: raw, µs per batch`, cpu.raw, 'µs')
  record(`${label}: B / A, block by block`, cpu.B.map((b, i) => b / cpu.A[i]), '×')
}
console.log()
console.log('B / A < 1 in time or CPU per batch, > 1 in events/s: B is faster.')
