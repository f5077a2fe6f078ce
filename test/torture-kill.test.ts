import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
// The agent runs as a separate process from the built package (npm test builds first).
import { runKillTorture } from '../dist/torture/kill-runner.js'

test('SIGKILL at random moments (turns, appends, repairs, forks): every acknowledged event survives, 200 kills', async () => {
  const lanes = 2
  const roots = await Promise.all(Array.from({ length: lanes }, () => mkdtemp(join(tmpdir(), 'spj-kill-'))))
  try {
    const reports = await Promise.all(roots.map((root, i) => runKillTorture({ root, kills: 100, seed: 101 + i })))
    const kills = reports.reduce((a, r) => a + r.kills, 0)
    const acked = reports.reduce((a, r) => a + r.ackedEvents, 0)
    console.log(`SIGKILL torture: ${kills} kills, ${acked} acknowledged events checked, 0 lost`)
    expect(reports.flatMap((r) => r.failures)).toEqual([])
    expect(kills).toBe(200)
    expect(acked).toBeGreaterThan(10_000)
  } finally {
    await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })))
  }
}, 300_000)
