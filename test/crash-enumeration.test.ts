import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { type EnumerationResult, enumerateCrashStates, randomWorkload, type WorkloadStep } from '../src/torture/crash-enumeration.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { contentVariants } from '../src/testing/index.js'

const report = { workloads: 0, states: 0, points: 0, unexplored: { dirCombos: 0, fileCombos: 0, overCap: 0 } }
const tally = (r: EnumerationResult) => {
  report.workloads++
  report.states += r.states
  report.points += r.crashPoints
  for (const k of ['dirCombos', 'fileCombos', 'overCap'] as const) report.unexplored[k] += r.unexplored[k]
}

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
    tally(r)
    expect(r.failures).toEqual([])
    expect(r.crashPoints).toBeGreaterThan(30)
    expect(r.states).toBeGreaterThan(500)
  })

  test('an append of several blocks: a crash may zero any of its blocks, not only its first (writeback out of order)', async () => {
    const workload: WorkloadStep[] = [
      { op: 'create', id: 'a', cwd: '/proj' },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
      { op: 'append', id: 'a', shape: 'chunks', size: 40 }, // ~13 KiB: four blocks
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
    ]
    const r = await enumerateCrashStates(workload)
    tally(r)
    expect(r.failures).toEqual([])
    expect(r.states).toBeGreaterThan(50)
  })

  test('a repair that starts from a tail (a load from the last compaction): every crash point of its cut and its closers', async () => {
    const workload: WorkloadStep[] = [
      { op: 'create', id: 'a', cwd: '/proj' },
      { op: 'append', id: 'a', shape: 'turn', size: 2 },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
      { op: 'append', id: 'a', shape: 'compact', size: 2 },
      { op: 'append', id: 'a', shape: 'open-call', size: 1 },
      { op: 'reopen', id: 'a', from: 'last-compaction' },
      { op: 'append', id: 'a', shape: 'open-call', size: 1 },
      { op: 'tear', id: 'a', from: 'last-compaction' },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
    ]
    const r = await enumerateCrashStates(workload)
    tally(r)
    expect(r.failures).toEqual([])
    expect(r.crashPoints).toBeGreaterThan(20)
    expect(r.states).toBeGreaterThan(300)
    expect(r.tailLoads).toBe(2) // both repairs really started past seq 0
  })

  test('migrate and redact (§16): at every crash point of the rewrite the whole old log or the whole new one, never a mix, always loadable', async () => {
    const workload: WorkloadStep[] = [
      { op: 'create', id: 'a', cwd: '/proj' },
      { op: 'append', id: 'a', shape: 'turn', size: 2 },
      { op: 'append', id: 'a', shape: 'open-call', size: 1 },
      { op: 'migrate', id: 'a' },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
      { op: 'redact', id: 'a' },
      { op: 'append', id: 'a', shape: 'turn', size: 1 },
    ]
    const r = await enumerateCrashStates(workload, { formatVersion: 0 })
    tally(r)
    expect(r.failures).toEqual([])
    expect(r.crashPoints).toBeGreaterThan(30)
    expect(r.states).toBeGreaterThan(300)
  })

  test('the same workloads with O_DSYNC appends (one write on an O_DSYNC descriptor instead of write + fdatasync)', async () => {
    for (let seed = 1; seed <= 3; seed++) {
      const r = await enumerateCrashStates(randomWorkload(seed, 10), { maxImagesPerPoint: 64, dsyncWrites: true })
      tally(r)
      expect(r.failures).toEqual([])
      expect(r.states).toBeGreaterThan(100)
    }
  })

  test('property: generated workloads survive every crash state', async () => {
    const step = fc.oneof(
      fc.record({ op: fc.constant('append' as const), id: fc.constantFrom('a', 'b'), shape: fc.constantFrom('turn', 'open-call', 'close-turn', 'chunks', 'compact' as const), size: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ op: fc.constant('reopen' as const), id: fc.constantFrom('a', 'b'), from: fc.constantFrom('start' as const, 'last-compaction' as const) }),
      fc.record({ op: fc.constant('tear' as const), id: fc.constantFrom('a', 'b'), from: fc.constantFrom('start' as const, 'last-compaction' as const) }),
      fc.record({ op: fc.constant('fork' as const), parent: fc.constantFrom('a', 'b'), child: fc.constantFrom('c1', 'c2') }),
      fc.constant({ op: 'create' as const, id: 'b' }),
      fc.record({ op: fc.constantFrom('migrate' as const, 'redact' as const), id: fc.constantFrom('a', 'b') }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
        const r = await enumerateCrashStates([{ op: 'create', id: 'a', cwd: '/p' }, ...(steps as WorkloadStep[])], { maxImagesPerPoint: 64 })
        tally(r)
        expect(r.failures).toEqual([])
      }),
      { numRuns: Number(process.env.CRASH_RUNS ?? 25) },
    )
  })

  test('seeded random workloads (as the long form runs them)', { timeout: 240_000 }, async () => {
    for (let seed = 1; seed <= Number(process.env.CRASH_SEEDS ?? 8); seed++) {
      const r = await enumerateCrashStates(randomWorkload(seed, 10), { maxImagesPerPoint: 128 })
      tally(r)
      expect(r.failures).toEqual([])
    }
    const u = report.unexplored
    console.log(
      `crash enumeration: ${report.workloads} workloads, ${report.points} crash points, ${report.states} crash states checked, 0 failures; ` +
        `not explored (bounds): ${u.dirCombos} directory-entry combinations, ${u.fileCombos} multi-file content combinations, ${u.overCap} states over the per-point cap`,
    )
    for (const n of Object.values(u)) expect(Number.isFinite(n) && n >= 0).toBe(true)
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

  test('the bounds are counted: states beyond the per-point cap, directory combinations and multi-file contents left out', async () => {
    const fs = createCrashFileSystem()
    await fs.mkdir('/d', 0o700)
    await fs.syncDir('/')
    // 18 unsynced directory entries: 2^18 combinations, of which 256 are enumerated.
    for (let i = 0; i < 18; i++) await (await fs.open(`/d/f${i}`, 'wx')).close()
    const dirs = fs.crashStates({ maxImages: 10 })
    expect(dirs.images).toHaveLength(10)
    expect(dirs.unexplored.dirCombos).toBe(2 ** 18 - 256)
    expect(dirs.unexplored.overCap).toBeGreaterThan(0)
    await fs.syncDir('/d')
    // Two files with unsynced lines: each alone through its variants, and both kept; not every pair.
    for (const name of ['f0', 'f1']) {
      const h = await fs.open(`/d/${name}`, 'r+')
      const b = Buffer.from('{"a":1}\n{"b":2}\n')
      await h.write(b, 0, b.length, 0)
      await h.close()
    }
    const files = fs.crashStates()
    const n = contentVariants(Buffer.alloc(0), Buffer.from('{"a":1}\n{"b":2}\n')).length
    expect(files.unexplored.dirCombos).toBe(0)
    expect(files.unexplored.overCap).toBe(0)
    // n variants each: n * n pairs, of which all-synced, each file alone (n - 1 each) and all kept are visited.
    expect(files.unexplored.fileCombos).toBe(n * n - (1 + 2 * (n - 1) + 1))
    expect(files.images.length).toBeLessThanOrEqual(1 + 2 * (n - 1) + 1)
  })
})
