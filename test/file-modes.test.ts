import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence, type FileHandle, type FileSystem } from '../src/index.js'
import { createNodeFileSystem } from '../src/jsonl/fs/node-file-system.js'
import { createCrashFileSystem, createFaultInjectingFileSystem, type FaultInjectingFileSystem } from '../src/testing/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// Files are created 0600 and can only lose bits to the umask: the lock record's fstat shows
// whether they did, and the lock record and the log are chmod'ed only then (docs/decisions.md).

const ROOT = '/data/sessions'
const LOCKS = `${ROOT}/.locks`

/** A crash-modelled disk under `umask`, with every call recorded. */
function disk(umask: number): FaultInjectingFileSystem {
  return createFaultInjectingFileSystem(createCrashFileSystem(undefined, { umask }))
}

const perms = async (fs: FileSystem, path: string) => ((await fs.stat(path)).mode ?? -1) & 0o777
const fchmods = (fs: FaultInjectingFileSystem, where: string) =>
  fs.calls.filter((c) => c.op === 'fchmod' && c.path.startsWith(`${where}/.tmp-`)).length

describe('the crash-modelled disk models modes', () => {
  test('creation takes the umask away from the mode asked for; chmod sets it whole', async () => {
    const fs = createCrashFileSystem(undefined, { umask: 0o277 })
    await fs.mkdir('/d', 0o700)
    const h = await fs.open('/d/f', 'wx', 0o600)
    expect((await h.stat()).mode).toBe(0o100400)
    expect((await fs.stat('/d')).mode).toBe(0o040500)
    await h.chmod(0o600)
    expect((await fs.stat('/d/f')).mode).toBe(0o100600)
    await fs.chmod('/d', 0o700)
    expect((await fs.stat('/d')).mode).toBe(0o040700)
    await h.close()
    const plain = createCrashFileSystem()
    await (await plain.open('/g', 'wx')).close()
    expect((await plain.stat('/g')).mode).toBe(0o100644) // 0666 under the default umask 022
  })

  test("the Node seam reports Node's mode", async () => {
    const dir = await tmpRoot()
    const fs = createNodeFileSystem()
    const h = await fs.open(join(dir, 'f'), 'wx', 0o600)
    await h.chmod(0o640)
    expect((await h.stat()).mode).toBe((await stat(join(dir, 'f'))).mode)
    expect(((await h.stat()).mode ?? 0) & 0o777).toBe(0o640)
    await h.close()
  })
})

describe('no chmod when the file came out 0600', () => {
  test.each([
    ['0022', 0o022],
    ['0077', 0o077],
    ['0002', 0o002],
  ] as const)('umask %s: two new sessions, no fchmod, lock and logs 0600', async (_label, umask) => {
    const fs = disk(umask)
    const p = createJsonlPersistence({ root: ROOT, fs })
    for (const id of ['a', 'b']) {
      await p.create(meta(id))
      await p.append(id, turn(0, 1))
      expect(await perms(fs, `${LOCKS}/${id}.lock`)).toBe(0o600)
      expect(await perms(fs, p.locate(meta(id)).path)).toBe(0o600)
    }
    expect(fs.calls.filter((c) => c.op === 'fchmod')).toEqual([])
    await p.closeAll()
  })
})

describe('chmod when the umask took owner bits', () => {
  test('umask 0277: the lock record and the log are chmod to 0600 before they are published', async () => {
    const fs = disk(0o277)
    const p = createJsonlPersistence({ root: ROOT, fs })
    for (const id of ['a', 'b']) {
      await p.create(meta(id, { cwd: '/w' }))
      await p.append(id, turn(0, 1))
      expect(await perms(fs, `${LOCKS}/${id}.lock`)).toBe(0o600)
      expect(await perms(fs, p.locate(meta(id, { cwd: '/w' })).path)).toBe(0o600)
    }
    const bucket = join(p.locate(meta('a', { cwd: '/w' })).path, '..')
    expect(fchmods(fs, LOCKS)).toBe(2)
    expect(fchmods(fs, bucket)).toBe(2)
    // Published only once chmod'ed and that synced: the log's fchmod, then an fsync (fdatasync
    // need not carry a mode), come before its link.
    const ops = fs.calls.filter((c) => c.path.startsWith(bucket)).map((c) => c.op)
    expect(ops.indexOf('fchmod')).toBeLessThan(ops.indexOf('link'))
    expect(ops.slice(ops.indexOf('fchmod'), ops.indexOf('link'))).toContain('sync')
    await p.closeAll()
  })

  test('a fork and an imported log are chmod too', async () => {
    const fs = disk(0o277)
    const p = createJsonlPersistence({ root: ROOT, fs })
    await p.create(meta('parent'))
    await p.append('parent', turn(0, 1))
    await p.fork('parent', { id: 'child', seedLength: 4, createdAt: 1 })
    const raw = await p.readRaw('parent')
    await p.closeAll()
    const q = createJsonlPersistence({ root: '/elsewhere', fs })
    await q.importRaw(raw)
    expect(await perms(fs, p.locate(meta('child')).path)).toBe(0o600)
    expect(await perms(fs, q.locate(meta('parent')).path)).toBe(0o600)
  })

  test('a seam whose stats carry no mode: every lock record and log is chmod', async () => {
    const fs = disk(0o022)
    const noModes: FileSystem = {
      ...fs,
      open: async (path, flags, mode) => {
        const h = await fs.open(path, flags, mode)
        const stripped: FileHandle = {
          ...h,
          stat: async () => {
            const { mode: _dropped, ...rest } = await h.stat()
            return rest
          },
        }
        return stripped
      },
    }
    const p = createJsonlPersistence({ root: ROOT, fs: noModes })
    for (const id of ['a', 'b']) {
      await p.create(meta(id))
      await p.append(id, turn(0, 1))
    }
    expect(fchmods(fs, LOCKS)).toBe(2)
    expect(fchmods(fs, `${ROOT}/_no-cwd`)).toBe(2)
    await p.closeAll()
  })
})

// vitest runs test files in forked processes here (pool 'forks' in vitest.config.ts), so the
// umask, which belongs to the whole process, can be set for the length of one test.
describe('on the real file system', () => {
  let old: number
  beforeEach(() => {
    old = process.umask(0o022)
  })
  afterEach(() => {
    process.umask(old)
  })

  test('umask 0277: logs, lock and directories come out as the format says', async () => {
    process.umask(0o277)
    const root = join(await tmpRoot(), 'root')
    const p = createJsonlPersistence({ root })
    await p.create(meta('u', { cwd: '/x' }))
    await p.append('u', turn(0, 1))
    const mode = async (path: string) => (await stat(path)).mode & 0o777
    expect(await mode(join(root, '.locks', 'u.lock'))).toBe(0o600)
    expect(await mode(p.locate(meta('u', { cwd: '/x' })).path)).toBe(0o600)
    expect(await mode(join(root, '.locks'))).toBe(0o700)
    await p.closeAll()
  })

  test('the umask changing between two sessions: the second log is still 0600', async () => {
    const root = join(await tmpRoot(), 'root')
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('first'))
    await p.append('first', turn(0, 1))
    expect(fs.calls.filter((c) => c.op === 'fchmod')).toEqual([])
    process.umask(0o277)
    await p.create(meta('second'))
    await p.append('second', turn(0, 1))
    const mode = async (path: string) => (await stat(path)).mode & 0o777
    expect(await mode(p.locate(meta('first')).path)).toBe(0o600)
    expect(await mode(p.locate(meta('second')).path)).toBe(0o600)
    expect(await mode(join(root, '.locks', 'second.lock'))).toBe(0o600)
    expect(fs.calls.filter((c) => c.op === 'fchmod')).toHaveLength(2)
    await p.closeAll()
  })
})
