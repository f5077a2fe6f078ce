import { expect, test } from 'vitest'
import { runFuzz } from '../src/torture/fuzz.js'

test('fuzzed logs: every mutant loads as a prefix of the original plus exact closers, or is refused untouched', async () => {
  const r = await runFuzz({ cases: Number(process.env.FUZZ_CASES ?? 10_000), hugeLine: true, seed: 11 })
  console.log(`fuzzed logs: ${r.cases} mutants, ${r.repairedOrIntact} loaded, ${r.refused} refused, ${r.undetectable} undetectable by format v0 (no checksums)`)
  expect(r.failures).toEqual([])
  expect(r.refused).toBeGreaterThan(1000)
  expect(r.repairedOrIntact).toBeGreaterThan(1000)
  expect(r.byMutation['huge-line']).toBe(1)
  expect(Object.keys(r.byMutation).length).toBeGreaterThanOrEqual(11)
}, 300_000)
