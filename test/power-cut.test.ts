import { describe, expect, test } from 'vitest'
import { POWER_CUT_CONFIGS, powerCutUnavailable, runPowerCuts } from '../dist/torture/power-cut.js'

describe('real power cuts: a loop-device file system shut down without flushing its journal', () => {
  for (const config of POWER_CUT_CONFIGS) {
    const why = powerCutUnavailable(config.fsType)
    if (why) console.warn(`POWER-CUT TEST (${config.name}) NOT RUN: ${why}`)
    test.skipIf(why !== undefined)(`${config.name}: every acknowledged event survives`, async () => {
      const r = await runPowerCuts(config, 3, 29)
      expect(r.failures).toEqual([])
      expect(r.cuts).toBe(3)
      expect(r.ackedEvents).toBeGreaterThan(100)
    }, 120_000)
  }
})
