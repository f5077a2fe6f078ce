import { describe, expect, test } from 'vitest'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { type CrashFileSystem, createCrashFileSystem } from '../src/testing/crash-fs.js'
import { meta, turn } from './helpers/events.js'
import { codeOf } from './helpers/codes.js'

const ROOT = '/r'

/** Another process's view of the same disk that has not synced any directory yet (it would, later). */
const withoutDirSyncs = (disk: FileSystem): FileSystem => ({ ...disk, syncDir: async () => {} })

/**
 * Every state a power cut right now may leave: B's acknowledged log must be in each, whole.
 * `atLeast`: the states the scenario must leave (more than one, or it proves nothing of a sync).
 */
async function expectSurvives(disk: CrashFileSystem, id: string, events: number, atLeast = 2) {
  const images = disk.crashImages()
  expect(images.length).toBeGreaterThanOrEqual(atLeast)
  for (const image of images) {
    const after = createJsonlPersistence({ root: ROOT, fs: createCrashFileSystem(image) })
    expect(await codeOf(after.inspect(id))).toBe('resolved')
    expect((await after.inspect(id)).events).toHaveLength(events)
  }
}

describe('a directory found already existing is synced before anything is published in it', () => {
  test('a bucket another process made (its root not synced yet): a log published in it survives a power cut', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir(ROOT, 0o700)
    await disk.syncDir('/')
    const a = createJsonlPersistence({ root: ROOT, fs: withoutDirSyncs(disk) })
    await a.create(meta('from-a'))
    await a.append('from-a', turn(0, 1)) // makes the bucket; its syncs have not happened
    const b = createJsonlPersistence({ root: ROOT, fs: disk })
    await b.create(meta('from-b'))
    expect(await codeOf(b.append('from-b', turn(0, 1)))).toBe('resolved') // acknowledged
    await expectSurvives(disk, 'from-b', 4)
  })

  test('a root another process made (its parent not synced yet): a log published under it survives a power cut', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir(ROOT, 0o700) // made by A, which has not synced '/' yet
    const b = createJsonlPersistence({ root: ROOT, fs: disk })
    await b.create(meta('from-b'))
    expect(await codeOf(b.append('from-b', turn(0, 1)))).toBe('resolved')
    await expectSurvives(disk, 'from-b', 4)
  })

  test('a bucket found existing is synced once per instance, not on every new session', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir(ROOT, 0o700)
    await disk.mkdir(`${ROOT}/_no-cwd`, 0o700)
    const syncs: string[] = []
    const fs: FileSystem = { ...disk, syncDir: async (path) => (syncs.push(path), disk.syncDir(path)) }
    const b = createJsonlPersistence({ root: ROOT, fs })
    for (const id of ['s1', 's2', 's3']) {
      await b.create(meta(id))
      await b.append(id, turn(0, 1))
    }
    // The root and its parent once, then the bucket once per published log.
    expect(syncs.filter((p) => p === ROOT)).toHaveLength(1)
    expect(syncs.filter((p) => p === '/')).toHaveLength(1)
    expect(syncs.filter((p) => p === `${ROOT}/_no-cwd`)).toHaveLength(3)
  })
})

describe('the root found existing under a parent that cannot be opened', () => {
  test('is used without syncing that parent (EACCES there is tolerated); a failing sync of the root itself is not', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir(ROOT, 0o700)
    const refuse = (code: string, at: string): FileSystem => ({
      ...disk,
      syncDir: async (path) => {
        if (path === at) throw Object.assign(new Error(`${code}: ${path}`), { code })
        return disk.syncDir(path)
      },
    })
    const ok = createJsonlPersistence({ root: ROOT, fs: refuse('EACCES', '/') })
    await ok.create(meta('a'))
    expect(await codeOf(ok.append('a', turn(0, 1)))).toBe('resolved')
    const failing = createJsonlPersistence({ root: ROOT, fs: refuse('EIO', '/') })
    await failing.create(meta('b'))
    expect(await codeOf(failing.append('b', turn(0, 1)))).toBe('E_IO')
    const rootRefused = createJsonlPersistence({ root: ROOT, fs: refuse('EACCES', ROOT) })
    await rootRefused.create(meta('c'))
    expect(await codeOf(rootRefused.append('c', turn(0, 1)))).toBe('E_IO')
  })
})

describe("a log found by a load has its name made durable before the load's appends are acknowledged", () => {
  test('a log another process linked and died before syncing its bucket: what this instance appends after loading it survives a power cut', async () => {
    const disk = createCrashFileSystem()
    await disk.mkdir(ROOT, 0o700)
    await disk.syncDir('/')
    // A links the log but never syncs a directory (it died before it did), acknowledging nothing.
    const a = createJsonlPersistence({ root: ROOT, fs: withoutDirSyncs(disk) })
    await a.create(meta('m'))
    await a.append('m', turn(0, 1))
    await a.closeAll() // its lock goes, as a dead holder's would be taken over
    const b = createJsonlPersistence({ root: ROOT, fs: disk })
    expect((await b.load('m')).events).toHaveLength(4)
    expect(await codeOf(b.append('m', turn(4, 2)))).toBe('resolved') // acknowledged: seq 4..7
    await b.closeAll()
    // Every state a power cut may leave now holds the log, whole (before: one of two had no log;
    // now everything is synced, so one state).
    await expectSurvives(disk, 'm', 8, 1)
  })

  test('a load that only reads syncs no directory, nor appends with sync none; with sync data the first append after a load syncs the bucket once', async () => {
    const disk = createCrashFileSystem()
    const calls: string[] = []
    const seen: FileSystem = { ...disk, syncDir: async (p: string) => (calls.push(p), disk.syncDir(p)) }
    const w = createJsonlPersistence({ root: ROOT, fs: disk })
    await w.create(meta('q'))
    await w.append('q', turn(0, 1))
    await w.closeAll()
    const reader = createJsonlPersistence({ root: ROOT, fs: seen })
    await reader.load('q')
    await reader.closeAll()
    expect(calls).toEqual([])
    const none = createJsonlPersistence({ root: ROOT, fs: seen, sync: 'none' })
    await none.load('q')
    await none.append('q', turn(4, 2))
    await none.closeAll()
    expect(calls).toEqual([])
    const data = createJsonlPersistence({ root: ROOT, fs: seen })
    await data.load('q')
    await data.append('q', turn(8, 3))
    await data.append('q', turn(12, 4))
    await data.closeAll()
    // The bucket synced once, at the first append after the load, not at each.
    expect(calls.filter((p) => p === `${ROOT}/_no-cwd`)).toHaveLength(1)
  })
})
