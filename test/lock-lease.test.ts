import { open, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import type { SessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import { createFaultInjectingFileSystem, type FaultInjectingFileSystem } from '../src/testing/fault-injection.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

const STALE = 1000

/** The seam, recording every call, plus a way to wait for the next read of a path to end (its close). */
function recordingFs(): FaultInjectingFileSystem & { readDone(path: string): Promise<void> } {
  const inner = createFaultInjectingFileSystem()
  const waiters: { path: string; resolve: () => void }[] = []
  const fs = Object.create(inner) as FaultInjectingFileSystem & { readDone(path: string): Promise<void> }
  fs.open = async (path, flags, mode) => {
    const h = await inner.open(path, flags, mode)
    return {
      ...h,
      async close() {
        try {
          await h.close()
        } finally {
          for (const w of waiters.filter((x) => x.path === path)) w.resolve()
        }
      },
    }
  }
  fs.readDone = (path) => new Promise((resolve) => waiters.push({ path, resolve }))
  return fs
}

/** The calls of one confirmation: touch the lock, then read its record (inode and token). */
const CONFIRM = ['utimes', 'open', 'fstat', 'read', 'close']

const lockCalls = (fs: FaultInjectingFileSystem, from: number) =>
  fs.calls.slice(from).filter((c) => c.path.includes(`${'/'}.locks${'/'}`)).map((c) => c.op)

async function holder(fs: FileSystem) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, fs, staleLockMs: STALE })
  await p.create(meta('leased'))
  await p.append('leased', turn(0, 1)) // takes the lock
  return { root, p, lock: join(root, '.locks', 'leased.lock'), log: p.locate(meta('leased')).path }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('the writer lock is a lease', () => {
  test('an append within staleLockMs / 2 of the last confirmation makes no file-system call for the lock', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { p } = await holder(fs)
    vi.clearAllTimers() // a starved heartbeat: only the appends can confirm
    vi.advanceTimersByTime(STALE / 2 - 1)
    const from = fs.calls.length
    await p.append('leased', turn(4, 2))
    await p.append('leased', turn(8, 3))
    expect(lockCalls(fs, from)).toEqual([])
    // Exactly one write and one data sync per append: nothing else on the path.
    expect(fs.calls.slice(from).map((c) => c.op)).toEqual(['write', 'datasync', 'write', 'datasync'])
    await p.closeAll()
  })

  test('a later append confirms first (touch, then check), and the one after it is free again', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { p } = await holder(fs)
    vi.clearAllTimers()
    vi.advanceTimersByTime(STALE / 2 + 1)
    let from = fs.calls.length
    await p.append('leased', turn(4, 2))
    expect(lockCalls(fs, from)).toEqual(CONFIRM)
    from = fs.calls.length
    await p.append('leased', turn(8, 3))
    expect(lockCalls(fs, from)).toEqual([])
    await p.closeAll()
  })

  test('a lock removed by hand is found lost by the first append after the lease: E_LOCKED, nothing written', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { p, lock, log } = await holder(fs)
    vi.clearAllTimers()
    await unlink(lock)
    vi.advanceTimersByTime(STALE / 2 + 1)
    const before = await readFile(log)
    expect((await rejection(p.append('leased', turn(4, 2)))).code).toBe('E_LOCKED')
    expect(await readFile(log)).toEqual(before)
    // Lost for good, even once the lease is renewed in time: no more file-system calls either.
    const from = fs.calls.length
    expect((await rejection(p.append('leased', turn(4, 2)))).code).toBe('E_LOCKED')
    expect(fs.calls.length).toBe(from)
    await p.closeAll()
  })

  test('a lock replaced by another file is lost too, and the holder leaves the other file alone on close', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { root, p, lock, log } = await holder(fs)
    vi.clearAllTimers()
    const other = join(root, '.locks', 'other')
    await writeFile(other, '{}')
    await rename(other, lock)
    vi.advanceTimersByTime(STALE / 2 + 1)
    const before = await readFile(log)
    expect((await rejection(p.append('leased', turn(4, 2)))).code).toBe('E_LOCKED')
    expect(await readFile(log)).toEqual(before)
    await p.closeAll()
    expect(await readFile(lock, 'utf8')).toBe('{}')
  })

  test('a lock rewritten in place (same inode) with another owner\'s record is lost: E_LOCKED naming that owner, nothing written, left alone on close', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { p, lock, log } = await holder(fs)
    vi.clearAllTimers()
    // What a file system that reuses a freed inode number shows: the lock was removed and another
    // instance took it, and its file has our inode. Rewriting ours in place shows the same.
    const ours = JSON.parse(await readFile(lock, 'utf8')) as Record<string, unknown>
    const theirs = `${JSON.stringify({ ...ours, pid: 999_999, since: 12_345, token: 'another-holder' })}\n`
    const ino = (await stat(lock)).ino
    const h = await open(lock, 'r+')
    await h.truncate(0)
    await h.write(theirs, 0)
    await h.close()
    expect((await stat(lock)).ino).toBe(ino)
    vi.advanceTimersByTime(STALE / 2 + 1)
    const before = await readFile(log)
    const err = await rejection(p.append('leased', turn(4, 2)))
    expect(err.code).toBe('E_LOCKED')
    expect((err as SessionPersistenceError).holder).toMatchObject({ pid: 999_999, since: 12_345 })
    expect(await readFile(log)).toEqual(before)
    await p.closeAll()
    expect(await readFile(lock, 'utf8')).toBe(theirs)
  })

  test('a lock rewritten in place is left alone by close even when no append found it lost', async () => {
    const fs = recordingFs()
    const { p, lock } = await holder(fs)
    const ours = JSON.parse(await readFile(lock, 'utf8')) as Record<string, unknown>
    const theirs = `${JSON.stringify({ ...ours, token: 'another-holder' })}\n`
    const h = await open(lock, 'r+')
    await h.truncate(0)
    await h.write(theirs, 0)
    await h.close()
    await p.closeAll()
    expect(await readFile(lock, 'utf8')).toBe(theirs)
  })

  test('the holder refreshes every staleLockMs / 3, which renews the lease', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const fs = recordingFs()
    const { p, lock } = await holder(fs)
    const old = new Date(Date.now() - 60_000)
    const { utimes } = await import('node:fs/promises')
    await utimes(lock, old, old)
    let from = fs.calls.length
    const refreshed = fs.readDone(lock)
    vi.advanceTimersByTime(Math.floor(STALE / 3) - 1)
    expect(lockCalls(fs, from)).toEqual([]) // not yet
    vi.advanceTimersByTime(1)
    await refreshed
    expect(lockCalls(fs, from)).toEqual(CONFIRM)
    expect(Date.now() - (await stat(lock)).mtimeMs).toBeLessThan(60_000)
    // The refresh at staleLockMs / 3 confirmed the lock: until staleLockMs / 3 + staleLockMs / 2
    // an append needs no call for the lock, although more than half has passed since the lock was taken.
    vi.clearAllTimers()
    vi.advanceTimersByTime(STALE / 2 - 2)
    from = fs.calls.length
    await p.append('leased', turn(4, 2))
    expect(lockCalls(fs, from)).toEqual([])
    await p.closeAll()
  })

  test('close releases the lock: the next instance takes it at once', async () => {
    const fs = recordingFs()
    const { root, p, lock } = await holder(fs)
    await p.closeAll()
    await expect(stat(lock)).rejects.toMatchObject({ code: 'ENOENT' })
    const q = createJsonlPersistence({ root, staleLockMs: STALE })
    expect((await q.load('leased')).events).toHaveLength(4)
    await q.closeAll()
  })
})

test('a lock published while closing its temporary file failed is still held, and released on close', async () => {
  const fs = createFaultInjectingFileSystem()
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, fs, staleLockMs: STALE })
  fs.inject({ op: 'close', path: (path) => path.includes('/.locks/.tmp-'), code: 'EIO', times: 1 })
  await p.create(meta('closing'))
  await p.append('closing', turn(0, 1))
  const other = createJsonlPersistence({ root, staleLockMs: STALE })
  expect((await rejection(other.load('closing'))).code).toBe('E_LOCKED')
  await p.closeAll()
  expect((await other.load('closing')).events).toHaveLength(4)
  await other.closeAll()
})

describe('review: a load repairs a torn tail only while it still holds the lock', () => {
  test('a lock lost while the log was being read: the load rejects E_LOCKED and cuts nothing', async () => {
    const root = await tmpRoot()
    const first = createJsonlPersistence({ root, staleLockMs: STALE })
    await first.create(meta('torn'))
    await first.append('torn', turn(0, 1))
    const log = first.locate(meta('torn')).path
    await first.closeAll()
    await writeFile(log, '{"seq":4,"type":"turn/st', { flag: 'a' }) // a torn tail to cut
    const before = await readFile(log)
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const lock = join(root, '.locks', 'torn.lock')
    const inner = createFaultInjectingFileSystem()
    const fs = Object.create(inner) as FileSystem
    fs.open = async (path, flags, mode) => {
      const h = await inner.open(path, flags, mode)
      if (path === log && flags !== 'r') {
        // While the log is read, the lease runs out with no heartbeat, and the lock is removed
        // by hand (another instance may now load and append).
        vi.clearAllTimers()
        vi.advanceTimersByTime(STALE / 2 + 1)
        await unlink(lock)
      }
      return h
    }
    const p = createJsonlPersistence({ root, fs, staleLockMs: STALE })
    expect((await rejection(p.load('torn'))).code).toBe('E_LOCKED')
    expect(await readFile(log)).toEqual(before)
  })
})

test('a staleLockMs past the longest timer delay (2^31 - 1 ms) does not refresh every 1 ms, and Node gives no TimeoutOverflowWarning', async () => {
  const warnings: string[] = []
  const onWarning = (w: Error) => warnings.push(w.name)
  process.on('warning', onWarning)
  try {
    const fs = createFaultInjectingFileSystem()
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, fs, staleLockMs: 2 ** 33 })
    await p.create(meta('long'))
    await p.append('long', turn(0, 1))
    const lock = join(root, '.locks', 'long.lock')
    const mtime = (await stat(lock)).mtimeMs
    const from = fs.calls.length
    // Real timers: with the delay overflowed, a second holds about a thousand refreshes.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(lockCalls(fs, from)).toEqual([])
    expect((await stat(lock)).mtimeMs).toBe(mtime)
    expect(warnings).not.toContain('TimeoutOverflowWarning')
    await p.closeAll()
  } finally {
    process.off('warning', onWarning)
  }
})
