// `npm run torture [-- --kills N --crash-workloads N --fuzz N --power-cuts N --disk-full N --quick]`
// The long forms of the crash proofs (docs/reliability.md). Prints one line per proof and exits
// non-zero if anything acknowledged was lost or anything unexpected was thrown.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { enumerateCrashStates, randomWorkload } from './crash-enumeration.js'
import { diskFullBytes, mountTmpfs, runDiskFull } from './disk-full.js'
import { runFuzz } from './fuzz.js'
import { runKillTorture } from './kill-runner.js'
import { POWER_CUT_CONFIGS, powerCutUnavailable, runPowerCuts } from './power-cut.js'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    kills: { type: 'string' },
    'crash-workloads': { type: 'string' },
    fuzz: { type: 'string' },
    'power-cuts': { type: 'string' },
    'disk-full': { type: 'string' },
    only: { type: 'string', multiple: true },
  },
})
const quick = values.quick
const n = (v: string | undefined, long: number, short: number) => Number(v ?? (quick ? short : long))
const want = (name: string) => !values.only || values.only.includes(name)
let failed = false
const line = (s: string) => console.log(s)

if (want('crash')) {
  const workloads = n(values['crash-workloads'], 200, 20)
  let states = 0
  let points = 0
  const failures: string[] = []
  const t = Date.now()
  for (let seed = 1; seed <= workloads; seed++) {
    const r = await enumerateCrashStates(randomWorkload(seed, 10), { maxImagesPerPoint: 128 })
    states += r.states
    points += r.crashPoints
    failures.push(...r.failures.map((f) => `seed ${seed}: ${f}`))
  }
  line(`crash states: ${workloads} workloads, ${points} crash points, ${states} states checked, ${failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`)
  for (const f of failures.slice(0, 10)) line(`  ${f}`)
  failed ||= failures.length > 0
}

if (want('kills')) {
  const kills = n(values.kills, 2000, 60)
  const lanes = 2
  const roots = Array.from({ length: lanes }, () => mkdtempSync(join(tmpdir(), 'spj-kills-')))
  const t = Date.now()
  const reports = await Promise.all(roots.map((root, i) => runKillTorture({ root, kills: Math.ceil(kills / lanes), seed: 17 + i })))
  for (const r of roots) rmSync(r, { recursive: true, force: true })
  const total = reports.reduce((a, r) => a + r.kills, 0)
  const acked = reports.reduce((a, r) => a + r.ackedEvents, 0)
  const failures = reports.flatMap((r) => r.failures)
  line(`SIGKILL: ${total} kills, ${acked} acknowledged events checked, ${failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`)
  for (const f of failures.slice(0, 10)) line(`  ${f}`)
  failed ||= failures.length > 0
}

if (want('fuzz')) {
  const t = Date.now()
  const r = await runFuzz({ cases: n(values.fuzz, 100_000, 5_000), hugeLine: true })
  line(`fuzzed logs: ${r.cases} mutants: ${r.repairedOrIntact} loaded as a prefix plus closers, ${r.refused} refused untouched, ${r.undetectable} undetectable by format v0, ${r.failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`)
  for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
  failed ||= r.failures.length > 0
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
    line(`power cuts (${config.name}): ${r.cuts} cuts, ${r.ackedEvents} acknowledged events checked, ${r.failures.length} failures`)
    for (const f of r.failures.slice(0, 10)) line(`  ${f}`)
    failed ||= r.failures.length > 0
  }
}

process.exit(failed ? 1 : 0)
