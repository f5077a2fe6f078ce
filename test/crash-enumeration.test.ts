import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { enumerateCrashStates, randomWorkload, type WorkloadStep } from '../src/torture/crash-enumeration.js'
import { contentVariants } from '../src/testing/index.js'

const report = { workloads: 0, states: 0, points: 0 }

describe('crash-state enumeration (every crash point of every operation)', () => {
  test('first append (materialization), later appends, load repair and fork', async () => {
    const workload: WorkloadStep[] = [
      { op: 'create', id: 'a', cwd: '/proj' },
      { op: 'append', id: 'a', shape: 'turn', size: 2 },
      { op: 'append', id: 'a', shape: 'open-call', size: 1 },
      { op: 'reopen', id: 'a' },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
      { op: 'tear', id: 'a' },
      { op: 'fork', parent: 'a', child: 'child' },
      { op: 'append', id: 'child', shape: 'chunks', size: 3 },
    ]
    const r = await enumerateCrashStates(workload)
    report.workloads++
    report.states += r.states
    report.points += r.crashPoints
    expect(r.failures).toEqual([])
    expect(r.crashPoints).toBeGreaterThan(30)
    expect(r.states).toBeGreaterThan(500)
  })

  test('property: generated workloads survive every crash state', async () => {
    const step = fc.oneof(
      fc.record({ op: fc.constant('append' as const), id: fc.constantFrom('a', 'b'), shape: fc.constantFrom('turn', 'open-call', 'close-turn', 'chunks' as const), size: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ op: fc.constant('reopen' as const), id: fc.constantFrom('a', 'b') }),
      fc.record({ op: fc.constant('tear' as const), id: fc.constantFrom('a', 'b') }),
      fc.record({ op: fc.constant('fork' as const), parent: fc.constantFrom('a', 'b'), child: fc.constantFrom('c1', 'c2') }),
      fc.constant({ op: 'create' as const, id: 'b' }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
        const r = await enumerateCrashStates([{ op: 'create', id: 'a', cwd: '/p' }, ...(steps as WorkloadStep[])], { maxImagesPerPoint: 64 })
        report.workloads++
        report.states += r.states
        report.points += r.crashPoints
        expect(r.failures).toEqual([])
      }),
      { numRuns: Number(process.env.CRASH_RUNS ?? 25) },
    )
  })

  test('seeded random workloads (as the long form runs them)', { timeout: 240_000 }, async () => {
    for (let seed = 1; seed <= Number(process.env.CRASH_SEEDS ?? 8); seed++) {
      const r = await enumerateCrashStates(randomWorkload(seed, 10), { maxImagesPerPoint: 128 })
      report.workloads++
      report.states += r.states
      expect(r.failures).toEqual([])
    }
    console.log(`crash enumeration: ${report.workloads} workloads, ${report.points}+ crash points, ${report.states} crash states checked, 0 failures`)
  })

  test('the crash model offers lost, kept, torn and zeroed variants of unsynced data', () => {
    const durable = Buffer.from('{"a":1}\n')
    const current = Buffer.from('{"a":1}\n{"b":2}\n{"c":3}\n')
    const variants = contentVariants(durable, current).map((b) => b.toString('latin1'))
    expect(variants).toContain('{"a":1}\n')
    expect(variants).toContain('{"a":1}\n{"b":2}\n{"c":3}\n')
    expect(variants).toContain('{"a":1}\n{"b":2}\n')
    expect(variants).toContain('{"a":1}\n{"b":2}')
    expect(variants).toContain('{"a":1}\n{')
    expect(variants.some((v) => v.startsWith('{"a":1}\n\0\0\0') && v.length === current.length)).toBe(true)
  })
})
