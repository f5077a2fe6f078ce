// `npm run torture [-- --kills N --crash-workloads N --fuzz N --fuzz-version 0|1 --power-cuts N --disk-full N --two-process-images N --pg-kills N --quick --only NAME]`
// The long forms of the crash proofs (docs/reliability.md). Prints one line per proof and exits
// non-zero if anything acknowledged was lost or anything unexpected was thrown.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { addUnexplored, enumerateCrashStates, noneUnexplored, randomWorkload } from './crash-enumeration.js'
import { diskFullBytes, mountTmpfs, runDiskFull } from './disk-full.js'
import { runFuzz } from './fuzz.js'
import { runKillTorture } from './kill-runner.js'
import { POWER_CUT_CONFIGS, powerCutUnavailable, runPowerCuts } from './power-cut.js'
import { runPostgresTorturePhase } from './postgres-kills.js'
import { throwawayPostgresUnavailable } from './postgres-server.js'
import { enumerateTwoProcessCrashes } from './two-process.js'
import type { UnexploredStates } from '../testing/crash-fs.js'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    kills: { type: 'string' },
    'crash-workloads': { type: 'string' },
    fuzz: { type: 'string' },
    'fuzz-version': { type: 'string', multiple: true },
    'power-cuts': { type: 'string' },
    'disk-full': { type: 'string' },
    'two-process-images': { type: 'string' },
    'pg-kills': { type: 'string' },
    only: { type: 'string', multiple: true },
  },
})
const quick = values.quick
const n = (v: string | undefined, long: number, short: number) => Number(v ?? (quick ? short : long))
const want = (name: string) => !values.only || values.only.includes(name)
let failed = false
const line = (s: string) => console.log(s)
const bounds = (u: UnexploredStates) =>
  `not explored (bounds): ${u.dirCombos} directory-entry combinations, ${u.fileCombos} multi-file content combinations, ${u.overCap} states over the per-point cap`

if (want('crash')) {
  const workloads = n(values['crash-workloads'], 200, 20)
  let states = 0
  let points = 0
  const failures: string[] = []
  const unexplored = noneUnexplored()
  const t = Date.now()
  for (let seed = 1; seed <= workloads; seed++) {
    const r = await enumerateCrashStates(randomWorkload(seed, 10), { maxImagesPerPoint: 128 })
    states += r.states
    points += r.crashPoints
    addUnexplored(unexplored, r.unexplored)
    failures.push(...r.failures.map((f) => `seed ${seed}: ${f}`))
  }
  line(`crash states: ${workloads} workloads, ${points} crash points, ${states} states checked, ${failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s); ${bounds(unexplored)}`)
  for (const f of failures.slice(0, 10)) line(`  ${f}`)
  failed ||= failures.length > 0
}

if (want('kills')) {
  const kills = n(values.kills, 2000, 60)
  const lanes = 2
  const roots = Array.from({ length: lanes }, () => mkdtempSync(join(tmpdir(), 'spj-kills-')))
  const t = Date.now()
  const reports = await Promise.all(roots.map((root, i) => runKillTorture({ root, kills: Math.ceil(kills / lanes), seed: 17 + i, bigWrites: 0.5 })))
  for (const r of roots) rmSync(r, { recursive: true, force: true })
  const sum = (f: (r: (typeof reports)[number]) => number) => reports.reduce((a, r) => a + f(r), 0)
  const failures = reports.flatMap((r) => r.failures)
  line(
    `SIGKILL: ${sum((r) => r.kills)} kills (${sum((r) => r.killsDuringLoad)} during a load, ${sum((r) => r.killsDuringRepair)} of them during a repair; ` +
        `${sum((r) => r.killsDuringTailLoad)} during a load from the last compaction, ${sum((r) => r.killsDuringTailRepair)} of them repairing, ${sum((r) => r.tailResumes)} resumes from a tail; ` +
      `${sum((r) => r.stops)} at a chosen step of the load, ${sum((r) => r.stopsInRepairWrites)} of them just before the repair's own writes or syncs; ` +
      `${sum((r) => r.bigWrites)} inside a write of several MiB, ${sum((r) => r.tornTails)} left a torn tail, ${sum((r) => r.tornTailsCut)} torn tails cut by the next agent's load, ${sum((r) => r.tornTailsCutByKilledLoad)} by a load killed after its cut, ${sum((r) => r.tornTailsCutAtEnd)} by the final load, ${sum((r) => r.killsDuringCut)} inside a load with a torn tail to cut), ` +
      `${sum((r) => r.ackedEvents)} acknowledged events checked, ${failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`,
  )
  for (const f of failures.slice(0, 10)) line(`  ${f}`)
  failed ||= failures.length > 0
}

if (want('two-process')) {
  const t = Date.now()
  const r = await enumerateTwoProcessCrashes({ maxImagesPerPoint: n(values['two-process-images'], 256, 32) })
  line(`two-process crash states: ${r.schedules} interleavings, ${r.crashPoints} crash points, ${r.states} states checked, ${r.failedStates} failed, ${r.failures.length} failures listed (${((Date.now() - t) / 1000).toFixed(0)} s); ${bounds(r.unexplored)}`)
  for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
  failed ||= r.failures.length > 0
}

if (want('fuzz')) {
  // N mutants of each format version (version 1 first): --fuzz-version 1 for one of them.
  const versions = (values['fuzz-version'] ?? ['1', '0']).map((v) => (v === '0' ? 0 : v === '1' ? 1 : Number.NaN))
  for (const version of versions) {
    if (version !== 0 && version !== 1) throw new Error(`--fuzz-version must be 0 or 1`)
    const t = Date.now()
    const r = await runFuzz({ cases: n(values.fuzz, 100_000, 5_000), hugeLine: true, version })
    const changed =
      version === 0
        ? `${r.undetectable} loaded as valid lines the mutation changed (undetectable by format v0)`
        : `${r.undetectable} loaded as another history (${r.undetectableAsV0} of them a log whose header was rewritten as a valid version-0 one)`
    line(
      `fuzzed version-${version} logs: ${r.cases} mutants, each compared with what its own bytes say: ${r.repairedOrIntact} loaded as the original's prefix plus closers, ` +
        `${r.refused} refused untouched, ${changed}, ${r.failed} failures, ${r.silent} of them silent (${((Date.now() - t) / 1000).toFixed(0)} s)`,
    )
    for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
    failed ||= r.failed > 0 || (version === 1 && r.undetectable !== r.undetectableAsV0)
  }
}

if (want('disk-full')) {
  const cycles = n(values['disk-full'], 50, 10)
  const m = mountTmpfs(diskFullBytes(cycles))
  if ('unavailable' in m) {
    line(`disk full: NOT RUN — ${m.unavailable}`)
  } else {
    try {
      const r = await runDiskFull(m.dir, cycles)
      line(`disk full: ${r.cycles} cycles on a real tmpfs, ${r.enospcSeen} ENOSPC rolled back, ${r.failures.length} failures`)
      for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
      failed ||= r.failures.length > 0
    } finally {
      m.unmount()
    }
  }
}

if (want('power-cuts')) {
  const perConfig = Math.ceil(n(values['power-cuts'], 200, 8) / POWER_CUT_CONFIGS.length)
  for (const config of POWER_CUT_CONFIGS) {
    const why = powerCutUnavailable(config.fsType)
    if (why) {
      line(`power cuts (${config.name}): NOT RUN — ${why}`)
      continue
    }
    const r = await runPowerCuts(config, perConfig)
    line(
      `power cuts (${config.name}): ${r.cuts} cuts, package lost in ${r.packageLossCuts} (${r.ackedEvents} events checked), ` +
        `raw control lost in ${r.controlLossCuts} (${r.control.ackedRecords} records); ${r.verdict.reason}; ${r.failures.length} failures`,
    )
    for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
    failed ||= r.failures.length > 0
  }
}

if (want('postgres')) {
  // SIGKILLs of writer processes appending to a PostgreSQL server (SPJ_PG_URL, or a throwaway
  // server of Debian's postgresql-15 started for this phase).
  const url = process.env.SPJ_PG_URL
  const why = url ? undefined : throwawayPostgresUnavailable()
  if (why) line(`PostgreSQL SIGKILL: NOT RUN — ${why}`)
  else {
    const t = Date.now()
    const r = await runPostgresTorturePhase({ kills: n(values['pg-kills'], 2000, 100), ...(url ? { url } : {}) })
    line(`PostgreSQL SIGKILL: ${r.kills} kills, ${r.ackedEvents} acknowledged events checked, ${r.failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`)
    for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
    failed ||= r.failures.length > 0
  }
}

process.exit(failed ? 1 : 0)
