import { describe, expect, test } from 'vitest'
import { enumerateTwoProcessCrashes } from '../src/torture/two-process.js'

describe('crash states with two processes sharing a root', () => {
  test('shared directories and a lock takeover, each process paused at every step: nothing acknowledged is lost, one writer wins, nothing stays locked', { timeout: 240_000 }, async () => {
    const r = await enumerateTwoProcessCrashes({ maxImagesPerPoint: Number(process.env.TWO_PROCESS_IMAGES ?? 32) })
    console.log(
      `two-process crash states: ${r.schedules} interleavings, ${r.crashPoints} crash points, ${r.states} states checked, ${r.failedStates} failed; ` +
        `not explored: ${r.unexplored.dirCombos} directory-entry combinations, ${r.unexplored.fileCombos} multi-file content combinations, ${r.unexplored.overCap} states over the per-point cap`,
    )
    expect(r.failures).toEqual([])
    expect(r.failedStates).toBe(0)
    expect(r.schedules).toBeGreaterThan(40)
    expect(r.states).toBeGreaterThan(1000)
    // The bounds are reported, not hidden: the counts exist and are finite.
    for (const n of Object.values(r.unexplored)) expect(Number.isFinite(n)).toBe(true)
  })
})
