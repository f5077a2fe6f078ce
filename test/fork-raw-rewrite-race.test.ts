import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { FileHandle, FileSystem } from '../src/jsonl/fs/file-system.js'
import type { SessionEvent } from '../src/session/schema.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { ev, meta } from './helpers/events.js'
import { withRead } from './helpers/observed-fs.js'

const ROOT = '/root'
const PARENT = 'parent'

/** Two turns; the first holds a secret a redact rewrites (the log's lines change length). */
function parentEvents(): SessionEvent[] {
  return [
    ev(0, 'turn/start', { turn: 0 }),
    ev(1, 'user/message', { content: 'my password is hunter2' }),
    ev(2, 'turn/end', { turn: 0, reason: { kind: 'completed' } }),
    ev(3, 'turn/start', { turn: 1 }),
    ev(4, 'user/message', { content: 'hunter2 again, and once more: hunter2' }),
    ev(5, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ev(6, 'turn/start', { turn: 2 }),
    ev(7, 'user/message', { content: 'ok' }),
    ev(8, 'turn/end', { turn: 2, reason: { kind: 'completed' } }),
  ]
}

/**
 * A view of `base` that runs `rewrite` once, when a reader of the parent's log has scanned it and
 * goes back for its bytes: at a second open of the parent's path, or at a read of an open handle
 * before a place it has already read (whichever comes first). `rewrite` is another store's
 * redact: it renames a new log over the parent's path, as it may while nobody holds the lock.
 */
function rewriteAfterScan(base: FileSystem, rewrite: () => Promise<unknown>) {
  const state = { fired: false, opens: 0 }
  const isParent = (path: string) => path.endsWith(`/${PARENT}.jsonl`)
  const fire = async () => {
    if (state.fired) return
    state.fired = true
    await rewrite()
  }
  const watched = (h: FileHandle): FileHandle => {
    let furthest = -1
    return withRead(h, async (buffer, offset, length, position) => {
      if (position < furthest) await fire()
      furthest = Math.max(furthest, position)
      return h.read(buffer, offset, length, position)
    })
  }
  const fs: FileSystem = {
    ...base,
    async open(path, flags, mode) {
      if (!isParent(path) || flags !== 'r') return base.open(path, flags, mode)
      if (++state.opens === 2) await fire()
      return watched(await base.open(path, flags, mode))
    },
  }
  return { fs, state }
}

async function setUp() {
  const disk = createCrashFileSystem()
  // "Another process": the operator's redact, on the same files.
  const operator = createJsonlPersistence({ root: ROOT, fs: disk })
  await operator.create(meta(PARENT))
  const before = parentEvents()
  await operator.append(PARENT, before)
  await operator.close(PARENT)
  const redact = async () => {
    const report = await operator.redact(PARENT, { pattern: 'hunter2' })
    expect(report.matches).toBe(3)
  }
  const seam = rewriteAfterScan(disk, redact)
  const store = createJsonlPersistence({ root: ROOT, fs: seam.fs })
  return { disk, operator, store, seam, before }
}

describe('a redact of the parent overlapping a read that scans it, then reads its bytes', () => {
  test('fork: the child is the parent before the rewrite, loads, and takes the next append', async () => {
    const { disk, operator, store, seam, before } = await setUp()
    const seedLength = 6
    await store.fork(PARENT, { id: 'child', seedLength })
    expect(seam.state.fired).toBe(true)
    // The rewrite did happen: the parent now holds the redacted text.
    const reloaded = createJsonlPersistence({ root: ROOT, fs: disk })
    expect(JSON.stringify((await reloaded.inspect(PARENT)).events)).not.toContain('hunter2')

    const next = [ev(seedLength, 'turn/start', { turn: 9 }), ev(seedLength + 1, 'turn/end', { turn: 9, reason: { kind: 'completed' } })]
    await store.append('child', next)
    await store.closeAll()
    await operator.closeAll()

    const loaded = await reloaded.load('child')
    expect(loaded.repair).toBeUndefined()
    // One file's events, never a mix: the parent's first seedLength events as it was read.
    expect(loaded.events).toEqual([...before.slice(0, seedLength), ...next])
    await reloaded.closeAll()
  })

  test('readRaw: the header and lines are of one file, and import as the log they were read from', async () => {
    const { disk, operator, store, seam, before } = await setUp()
    const unraced = await createJsonlPersistence({ root: ROOT, fs: disk }).readRaw(PARENT)
    const raw = await store.readRaw(PARENT)
    expect(seam.state.fired).toBe(true)
    // Byte for byte the log before the rewrite.
    expect(raw).toEqual(unraced)
    await operator.closeAll()

    const elsewhere = createJsonlPersistence({ root: '/copy', fs: disk })
    await elsewhere.importRaw(raw)
    const copied = await elsewhere.inspect(PARENT)
    expect(copied.repair).toBeUndefined()
    expect(copied.events).toEqual(before)
    await elsewhere.closeAll()
  })
})
