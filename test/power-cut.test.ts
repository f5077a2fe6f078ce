import { describe, expect, test } from 'vitest'
import {
  controlRecordsKept,
  judgeLosses,
  POWER_CUT_CONFIGS,
  powerCutUnavailable,
  runPowerCuts,
  signTestPValue,
} from '../dist/torture/power-cut.js'

// Real power cuts, with a raw write + fdatasync control writer cut at the same instant on the
// same file system: a lost acknowledged tail fails the run only when the control does not show
// the same loss (docs/reliability.md, "What the power-cut rig can prove").

describe('real power cuts: a loop-device file system shut down without flushing its journal', () => {
  for (const config of POWER_CUT_CONFIGS) {
    const why = powerCutUnavailable(config.fsType)
    if (why) console.warn(`POWER-CUT TEST (${config.name}) NOT RUN: ${why}`)
    test.skipIf(why !== undefined)(`${config.name}: every acknowledged event survives, or the control loses as much`, async () => {
      const r = await runPowerCuts(config, 3, 29)
      console.log(
        `power cuts (${config.name}): ${r.cuts} cuts; package lost acknowledged events in ${r.packageLossCuts} (${r.ackedEvents} events checked), control in ${r.controlLossCuts} (${r.control.ackedRecords} records checked); ${r.verdict.reason}`,
      )
      expect(r.failures).toEqual([])
      expect(r.cuts).toBe(3)
      expect(r.ackedEvents).toBeGreaterThan(100)
      expect(r.control.ackedRecords).toBeGreaterThanOrEqual(3 * 20)
    }, 120_000)
  }
})

describe('the loss verdict (no root needed)', () => {
  test('the sign test: P(X >= k), X ~ Binomial(n, 1/2)', () => {
    expect(signTestPValue(0, 0)).toBe(1)
    expect(signTestPValue(0, 5)).toBe(1)
    expect(signTestPValue(1, 1)).toBeCloseTo(0.5, 12)
    expect(signTestPValue(3, 3)).toBeCloseTo(0.125, 12)
    expect(signTestPValue(5, 5)).toBeCloseTo(1 / 32, 12)
    expect(signTestPValue(8, 10)).toBeCloseTo(56 / 1024, 12)
  })

  test('no package loss passes; a package loss the control does not show in the run fails', () => {
    expect(judgeLosses([[false, false], [false, true]]).fail).toBe(false)
    const v = judgeLosses([[true, false], [false, false], [false, false]])
    expect(v.fail).toBe(true)
    expect(v.onlyPackage).toBe(1)
  })

  test('when the control loses too, only a significantly higher package loss rate fails (one-sided exact McNemar, alpha 0.05)', () => {
    // Same cuts lost by both: explained by the rig.
    expect(judgeLosses([[true, true], [false, false], [false, false]]).fail).toBe(false)
    // One each, in different cuts: no evidence either way.
    const even = judgeLosses([[true, false], [false, true], [false, false]])
    expect(even.fail).toBe(false)
    expect(even.pValue).toBeCloseTo(0.75, 12)
    // Five cuts only the package lost against one only the control lost: p = 7/64 > 0.05.
    const five = [...Array(5).fill([true, false]), [false, true]] as [boolean, boolean][]
    expect(judgeLosses(five).fail).toBe(false)
    // Eight against none, once the control has shown it can lose (a busy host): p = 1/256.
    const eight = [...Array(8).fill([true, false]), [true, true]] as [boolean, boolean][]
    const v = judgeLosses(eight)
    expect(v.fail).toBe(true)
    expect(v.pValue).toBeCloseTo(1 / 256, 12)
  })

  test("the control's records count as a valid prefix: a torn or zeroed tail ends it", () => {
    const rec = (i: number) => `${i} ${'x'.repeat(120 + ((i * 37) % 160))}\n`
    const three = rec(0) + rec(1) + rec(2)
    expect(controlRecordsKept(three)).toBe(3)
    expect(controlRecordsKept(three + rec(3).slice(0, 10))).toBe(3)
    expect(controlRecordsKept(rec(0) + '\0'.repeat(200) + '\n' + rec(2))).toBe(1)
    expect(controlRecordsKept('')).toBe(0)
  })
})
