import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { createFaultInjectingFileSystem } from '../src/testing/fault-injection.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'

const ROOT = '/root'

/** A view of `base` whose listing of the root waits until released: a poller stopped mid-search. */
function pausedSearch(base: FileSystem) {
  let reached!: () => void
  let release!: () => void
  const state = {
    reached: new Promise<void>((r) => (reached = r)),
    released: new Promise<void>((r) => (release = r)),
  }
  const fs: FileSystem = {
    ...base,
    async readdir(path) {
      if (path === ROOT) {
        reached()
        await state.released
      }
      return base.readdir(path)
    },
  }
  return { fs, reached: state.reached, release }
}

/** Lets every operation already started on the in-memory file system run to completion. */
const settle = () => new Promise((r) => setImmediate(r))

describe('load and fork of an id with no log take no lock', () => {
  test('a poller stopped while it searches for a session that does not exist yet never makes its creator fail', async () => {
    const disk = createCrashFileSystem()
    const creator = createJsonlPersistence({ root: ROOT, fs: disk })
    for (let round = 0; round < 20; round++) {
      const id = `polled-${round}`
      const paused = pausedSearch(disk)
      const poller = createJsonlPersistence({ root: ROOT, fs: paused.fs })
      const polled = codeOf(poller.load(id))
      await paused.reached
      await settle() // whatever the poller does besides searching has happened by now
      await creator.create(meta(id))
      expect(await codeOf(creator.append(id, turn(0, 1)))).toBe('resolved')
      paused.release()
      // The poller then finds the log under the creator's lock.
      expect(await polled).toBe('E_LOCKED')
      await poller.closeAll()
      await creator.close(id)
    }
  })

  test('a poller interleaved with the creator step by step, every round: the creator always wins', async () => {
    const disk = createCrashFileSystem()
    const creator = createJsonlPersistence({ root: ROOT, fs: disk })
    const poller = createJsonlPersistence({ root: ROOT, fs: disk })
    for (let round = 0; round < 20; round++) {
      const id = `tight-${round}`
      await creator.create(meta(id))
      // Start the poll and the first append together, the poll first, with `round` idle turns between them.
      const polled = codeOf(poller.load(id))
      for (let i = 0; i < round; i++) await Promise.resolve()
      const appended = codeOf(creator.append(id, turn(0, 1)))
      expect(await appended).toBe('resolved')
      expect(['E_NOT_FOUND', 'E_LOCKED']).toContain(await polled)
      await creator.close(id)
    }
    await poller.closeAll()
  })

  test('neither a missing load nor a fork of a missing parent touches the lock directory', async () => {
    const fs = createFaultInjectingFileSystem(createCrashFileSystem())
    const p = createJsonlPersistence({ root: ROOT, fs })
    expect(await codeOf(p.load('nobody'))).toBe('E_NOT_FOUND')
    expect(await codeOf(p.fork('nobody', { id: 'child', seedLength: 0 }))).toBe('E_NOT_FOUND')
    expect(await codeOf(p.delete('nobody'))).toBe('E_NOT_FOUND')
    expect(fs.calls.filter((c) => c.path.includes('/.locks'))).toEqual([])
    // And the ids stay free for this very instance.
    await p.create(meta('nobody'))
    await p.append('nobody', turn(0, 1))
    await p.closeAll()
  })
})
