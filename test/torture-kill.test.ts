import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
// The agent runs as a separate process from the built package (npm test builds first).
import { runKillTorture } from '../dist/torture/kill-runner.js'

test('SIGKILL at random moments, at chosen steps of the start-up load (lock takeover, repair) and inside writes of several MiB (a torn tail the next load cuts): every acknowledged event survives, 200 kills', async () => {
  const lanes = 2
  const roots = await Promise.all(Array.from({ length: lanes }, () => mkdtemp(join(tmpdir(), 'spj-kill-'))))
  try {
    const reports = await Promise.all(roots.map((root, i) => runKillTorture({ root, kills: 100, seed: 101 + i, bigWrites: 0.5 })))
    const sum = (f: (r: (typeof reports)[number]) => number) => reports.reduce((a, r) => a + f(r), 0)
    const kills = sum((r) => r.kills)
    const acked = sum((r) => r.ackedEvents)
    console.log(
      `SIGKILL torture: ${kills} kills (${sum((r) => r.killsDuringLoad)} during a load, ${sum((r) => r.killsDuringRepair)} of them during a repair; ` +
        `${sum((r) => r.killsDuringTailLoad)} during a load from the last compaction, ${sum((r) => r.killsDuringTailRepair)} of them during its repair, ${sum((r) => r.tailResumes)} agents resumed from a tail; ` +
        `${sum((r) => r.stops)} stopped at a chosen step of the load, ${sum((r) => r.stopsInRepairWrites)} just before the repair's own writes; ` +
        `${sum((r) => r.bigWrites)} inside a big write, ${sum((r) => r.tornTails)} left a torn tail, ${sum((r) => r.tornTailsCut)} torn tails cut by the next agent's load, ${sum((r) => r.tornTailsCutByKilledLoad)} by a load killed after its cut, ` +
        `${sum((r) => r.tornTailsCutAtEnd)} by the final load, ${sum((r) => r.killsDuringCut)} kills inside a load with a tail to cut), ` +
        `${acked} acknowledged events checked, ${sum((r) => r.lost)} lost`,
    )
    expect(reports.flatMap((r) => r.failures)).toEqual([])
    expect(kills).toBe(200)
    expect(acked).toBeGreaterThan(10_000)
    // Verification never repairs: the agents' own loads do, and kills land inside them.
    expect(sum((r) => r.stops)).toBeGreaterThan(15)
    expect(sum((r) => r.killsDuringLoad)).toBeGreaterThanOrEqual(sum((r) => r.stops))
    expect(sum((r) => r.killsDuringRepair)).toBeGreaterThan(0)
    // half the agents resume from the last compaction: kills land inside those loads and their repairs too
    expect(sum((r) => r.killsDuringTailLoad)).toBeGreaterThan(10)
    expect(sum((r) => r.killsDuringTailRepair)).toBeGreaterThan(0)
    expect(sum((r) => r.tailResumes)).toBeGreaterThan(10)
    // a SIGKILL inside a write of several MiB tears the tail, and the next agent's own load cuts
    // it at the byte inspect saw (the runner fails the run otherwise), keeping every acknowledged event
    expect(sum((r) => r.bigWrites)).toBeGreaterThan(10)
    expect(sum((r) => r.tornTails)).toBeGreaterThan(0)
    expect(sum((r) => r.tornTailsCut)).toBeGreaterThan(0)
    expect(sum((r) => r.tornTailsCut + r.tornTailsCutByKilledLoad + r.tornTailsCutAtEnd)).toBe(sum((r) => r.tornTails))
  } finally {
    await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })))
  }
}, 300_000)
