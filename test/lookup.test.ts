import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createNodeFileSystem } from '../src/jsonl/fs/node-file-system.js'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import { createJsonlPersistence } from '../src/index.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

/** The Node seam with some calls replaced. */
function seam(overrides: Partial<FileSystem>): FileSystem {
  return { ...createNodeFileSystem(), ...overrides }
}

/** Writes a minimal valid log of `id` where `path` says. */
async function storedLog(path: string, id: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, `${JSON.stringify({ type: 'session', version: 0, id, createdAt: 1, delegationDepth: 0 })}\n`)
}

/** `create` must reject `E_EXISTS`, naming the log it found at `path`. */
async function expectExists(create: Promise<void>, path: string): Promise<void> {
  const err = await rejection(create)
  expect(err.code).toBe('E_EXISTS')
  expect(err.message).toContain(path)
}

describe('looking an id up in every bucket (docs/contract.md §4.2, 5.1, 5.3)', () => {
  test('create finds the id in a bucket other than its own: E_EXISTS naming that log', async () => {
    const root = await tmpRoot()
    const other = createJsonlPersistence({ root }).locate(meta('x', { cwd: '/elsewhere' })).path
    await storedLog(other, 'x')
    await expectExists(createJsonlPersistence({ root }).create(meta('x', { cwd: '/here' })), other)
  })

  test("the id's own bucket is looked at while the root is listed, not after", async () => {
    const root = await tmpRoot()
    const own = createJsonlPersistence({ root }).locate(meta('y', { cwd: '/p' })).path
    const node = createNodeFileSystem()
    let ownLookedAt: () => void = () => {}
    const ownStarted = new Promise<void>((resolve) => (ownLookedAt = resolve))
    const fs = seam({
      // The listing of the root completes only once the own bucket's lookup has started: one
      // trip after the other would never get there (the test then fails on vitest's timeout).
      async readdir(path) {
        if (path === root) await ownStarted
        return node.readdir(path)
      },
      stat(path) {
        if (path === own) ownLookedAt()
        return node.stat(path)
      },
    })
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('y', { cwd: '/p' }))
    await p.append('y', turn(0, 1)) // the re-check under the lock takes the same path
    await p.closeAll()
    expect((await readdir(dirname(own))).filter((n) => n.endsWith('.jsonl'))).toEqual(['y.jsonl'])
  })

  test('a log in its own bucket counts even when that bucket is missing from the listing', async () => {
    const root = await tmpRoot()
    const own = createJsonlPersistence({ root }).locate(meta('z', { cwd: '/p' })).path
    await storedLog(own, 'z')
    const node = createNodeFileSystem()
    // The listing was taken just before the bucket appeared.
    const fs = seam({ readdir: async (path) => (path === root ? [] : node.readdir(path)) })
    await expectExists(createJsonlPersistence({ root, fs }).create(meta('z', { cwd: '/p' })), own)
  })

  test('an unexpected error looking at the own bucket rejects E_IO with that cause', async () => {
    const root = await tmpRoot()
    const own = createJsonlPersistence({ root }).locate(meta('w', { cwd: '/p' })).path
    const node = createNodeFileSystem()
    const denied = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })
    const fs = seam({ stat: (path) => (path === own ? Promise.reject(denied) : node.stat(path)) })
    const err = await rejection(createJsonlPersistence({ root, fs }).create(meta('w', { cwd: '/p' })))
    expect(err.code).toBe('E_IO')
    expect((err as Error & { cause?: unknown }).cause).toBe(denied)
    expect(await readdir(root)).toEqual([])
  })

  test('when listing the root fails too, that error is reported and the lookup leaves no unhandled rejection', async () => {
    const root = await tmpRoot()
    const listing = Object.assign(new Error('EIO: i/o error, scandir'), { code: 'EIO' })
    const fs = seam({
      readdir: () => Promise.reject(listing),
      stat: () => Promise.reject(Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })),
    })
    const unhandled: unknown[] = []
    const record = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', record)
    try {
      const err = await rejection(createJsonlPersistence({ root, fs }).create(meta('v', { cwd: '/p' })))
      expect(err.code).toBe('E_IO')
      expect((err as Error & { cause?: unknown }).cause).toBe(listing)
      // Every promise here settles within microtasks (the seam rejects at once); Node reports an
      // unhandled one before the next turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', record)
    }
    expect(unhandled).toEqual([])
  })

  test('a root that does not exist yet holds no log: create succeeds and writes nothing', async () => {
    const root = join(await tmpRoot(), 'not-yet')
    const p = createJsonlPersistence({ root })
    await p.create(meta('u', { cwd: '/p' }))
    await p.closeAll()
    expect(await readdir(dirname(root))).toEqual([])
  })
})
