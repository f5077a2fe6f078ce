import { describe, expect, test } from 'vitest'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
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

  test('seams share one disk: a change through one is seen through the other and is a crash point; a paused seam waits; a killed one never settles', async () => {
    const disk = createCrashFileSystem()
    const a = disk.seam()
    const b = disk.seam()
    const points: string[] = []
    disk.onMutation = (op, path) => points.push(`${op} ${path}`)
    await a.mkdir('/d', 0o700)
    expect((await b.readdir('/')).map((e) => e.name)).toEqual(['d'])
    expect(points).toEqual(['mkdir /d'])
    // Before the sync, a power cut may lose the directory A made.
    expect(disk.crashImages().some((i) => !i.dirs.get('/')!.has('d'))).toBe(true)
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let seen: string | undefined
    a.beforeCall = async (op, path) => {
      seen = `${op} ${path}`
      await gate
    }
    const synced = a.syncDir('/')
    await Promise.resolve()
    expect(seen).toBe('syncDir /')
    expect(points).toEqual(['mkdir /d']) // paused before the call: nothing happened yet
    release()
    await synced
    expect(points).toEqual(['mkdir /d', 'syncDir /'])
    expect(disk.crashImages().every((i) => i.dirs.get('/')!.has('d'))).toBe(true)
    a.beforeCall = undefined
    const h = await a.open('/d/f', 'wx')
    a.kill()
    expect(a.killed).toBe(true)
    const never = Symbol('pending')
    const settled = await Promise.race([h.write(Buffer.from('x'), 0, 1, 0).then(() => 'settled'), new Promise((r) => setImmediate(() => r(never)))])
    expect(settled).toBe(never)
    expect((await b.stat('/d/f')).size).toBe(0) // the dead process wrote nothing
  })

  test('age moves every modification time into the past', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir('/d', 0o700)
    const before = (await disk.stat('/d')).mtimeMs
    disk.age(5000)
    expect((await disk.stat('/d')).mtimeMs).toBe(before - 5000)
  })
})
