import { expect, test } from 'vitest'
import { runFuzz } from '../src/torture/fuzz.js'

// CI's short form of the torture's fuzz phase (`npm run torture -- --only fuzz` runs 100,000 of each).
const CASES = Number(process.env.FUZZ_CASES ?? 10_000)

test('fuzzed version-0 logs: every mutant loads as a prefix of the original plus exact closers, or is refused untouched', async () => {
  const r = await runFuzz({ cases: CASES, hugeLine: true, seed: 11, version: 0 })
  console.log(`fuzzed version-0 logs: ${r.cases} mutants, ${r.repairedOrIntact} loaded, ${r.refused} refused, ${r.undetectable} undetectable by format v0 (no checksums)`)
  expect(r.failures).toEqual([])
  expect(r.refused).toBeGreaterThan(CASES / 10)
  expect(r.repairedOrIntact).toBeGreaterThan(CASES / 10)
  expect(r.byMutation['huge-line']).toBe(1)
  expect(Object.keys(r.byMutation).length).toBeGreaterThanOrEqual(14)
}, 300_000)

test('fuzzed version-1 logs: the same, and nothing loads as another history unless its header was rewritten as version 0', async () => {
  const r = await runFuzz({ cases: CASES, hugeLine: true, seed: 12, version: 1 })
  console.log(
    `fuzzed version-1 logs: ${r.cases} mutants, ${r.repairedOrIntact} loaded, ${r.refused} refused, ${r.undetectable} loaded as another history ` +
      `(${r.undetectableAsV0} of them with the header rewritten as a version-0 one), ${r.failed} disagreements (${r.silent} silent)`,
  )
  expect(r.failures).toEqual([])
  expect(r.silent).toBe(0)
  expect(r.undetectable).toBe(r.undetectableAsV0)
  expect(r.refused).toBeGreaterThan(CASES / 2)
  expect(r.repairedOrIntact).toBeGreaterThan(CASES / 10)
  expect(r.byMutation['huge-line']).toBe(1)
  // Every kind of mutation was drawn, the version-1 ones too.
  for (const kind of ['burst', 'change-bytes', 'resealed-defect', 'unsealed-line', 'crc-spelling', 'sealed-garbage-tail', 'two-mutations']) expect(r.byMutation[kind], kind).toBeGreaterThan(50)
}, 300_000)
