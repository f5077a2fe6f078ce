import { readdir, readFile, stat } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import { createNodeFileSystem } from '../src/jsonl/fs/node-file-system.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { createFaultInjectingFileSystem, type FaultInjectingFileSystem } from '../src/testing/fault-injection.js'
import { meta, turn } from './helpers/events.js'
import { codeOf } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

/** Node's seam, recording calls, and saying it supports O_DSYNC as Node's own seam does on Linux. */
function recording(): FaultInjectingFileSystem {
  const fs = Object.create(createFaultInjectingFileSystem()) as FaultInjectingFileSystem
  Object.defineProperty(fs, 'supportsDsync', { value: true })
  return fs
}

const logOps = (fs: FaultInjectingFileSystem, from: number) =>
  fs.calls.slice(from).filter((c) => !c.path.includes('/.locks/') && (c.path.endsWith('.jsonl') || c.path.includes('/.tmp-')))

/** The open flags (octal, from /proc/self/fdinfo) of every descriptor of this process on `path`. */
async function flagsOfOpen(path: string): Promise<number[]> {
  const out: number[] = []
  const { ino, dev } = await stat(path)
  for (const fd of await readdir('/proc/self/fd')) {
    // By inode: a descriptor opened on the temporary name still shows that (deleted) name.
    const target = await stat(`/proc/self/fd/${fd}`).catch(() => undefined)
    if (target?.ino !== ino || target.dev !== dev) continue
    const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8').catch(() => '')
    const m = /flags:\s+([0-7]+)/.exec(info)
    if (m) out.push(parseInt(m[1]!, 8))
  }
  return out
}
const LINUX_O_DSYNC = 0o10000

describe("dsyncWrites: with sync 'data', one O_DSYNC write per append instead of write + fdatasync", () => {
  test('a later append is one write and nothing else; the first append writes the temporary file the same way', async () => {
    const root = await tmpRoot()
    const fs = recording()
    const p = createJsonlPersistence({ root, fs, dsyncWrites: true })
    await p.create(meta('d'))
    let from = fs.calls.length
    await p.append('d', turn(0, 1))
    const first = logOps(fs, from).map((c) => c.op)
    expect(fs.calls.slice(from).find((c) => c.op === 'open' && c.path.includes('/.tmp-') && !c.path.includes('/.locks/'))?.detail).toBe('wxdsync')
    expect(first).not.toContain('datasync')
    from = fs.calls.length
    await p.append('d', turn(4, 2))
    expect(fs.calls.slice(from).map((c) => c.op)).toEqual(['write'])
    await p.closeAll()
    expect((await createJsonlPersistence({ root }).inspect('d')).events).toHaveLength(8)
  })

  test.skipIf(process.platform !== 'linux')('the descriptor really has O_DSYNC, for a new log and for a loaded one', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, dsyncWrites: true })
    await p.create(meta('real'))
    await p.append('real', turn(0, 1))
    const path = p.locate(meta('real')).path
    const created = await flagsOfOpen(path)
    expect(created.length).toBe(1)
    expect(created[0]! & LINUX_O_DSYNC).toBe(LINUX_O_DSYNC)
    await p.closeAll()
    await p.load('real')
    const loaded = await flagsOfOpen(path)
    expect(loaded.length).toBe(1)
    expect(loaded[0]! & LINUX_O_DSYNC).toBe(LINUX_O_DSYNC)
    await p.closeAll()
    // Off by default: the pair of calls, no O_DSYNC.
    const q = createJsonlPersistence({ root })
    await q.load('real')
    expect((await flagsOfOpen(path))[0]! & LINUX_O_DSYNC).toBe(0)
    await q.closeAll()
  })

  test('a failed O_DSYNC write is a failed sync: the file is cut back and synced, nothing is acknowledged, a retry works', async () => {
    const root = await tmpRoot()
    const fs = recording()
    const p = createJsonlPersistence({ root, fs, dsyncWrites: true })
    await p.create(meta('f'))
    await p.append('f', turn(0, 1))
    const path = p.locate(meta('f')).path
    const size = (await stat(path)).size
    const remove = fs.inject({ op: 'write', path, code: 'EIO', times: 1 })
    const from = fs.calls.length
    expect(await codeOf(p.append('f', turn(4, 2)))).toBe('E_IO')
    remove()
    expect(fs.calls.slice(from).map((c) => c.op)).toEqual(['write', 'truncate', 'datasync'])
    expect((await stat(path)).size).toBe(size)
    await p.append('f', turn(4, 2))
    await p.closeAll()
    expect((await createJsonlPersistence({ root }).inspect('f')).events).toHaveLength(8)
  })

  test("ignored with sync 'full' or 'none', and with a seam that cannot do it", async () => {
    const cases: [Partial<{ sync: 'full' | 'none' }>, FaultInjectingFileSystem, string[]][] = [
      [{ sync: 'full' }, recording(), ['write', 'sync']],
      [{ sync: 'none' }, recording(), ['write']],
      [{}, createFaultInjectingFileSystem({ ...createNodeFileSystem(), supportsDsync: false }), ['write', 'datasync']],
    ]
    for (const [config, fs, ops] of cases) {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, fs, dsyncWrites: true, ...config })
      await p.create(meta('i'))
      await p.append('i', turn(0, 1))
      expect(fs.calls.some((c) => c.op === 'open' && String(c.detail).endsWith('dsync'))).toBe(false)
      const from = fs.calls.length
      await p.append('i', turn(4, 2))
      expect(fs.calls.slice(from).map((c) => c.op)).toEqual(ops)
      await p.closeAll()
    }
  })

  test('dsyncWrites must be a boolean (E_CONFIG)', () => {
    expect(() => createJsonlPersistence({ root: '/x', dsyncWrites: 'yes' as never })).toThrow(
      expect.objectContaining({ code: 'E_CONFIG' }),
    )
  })

  test('every crash state, at every step of create, appends, repair and fork, keeps every acknowledged event', async () => {
    const disk = createCrashFileSystem()
    let acknowledged = new Map<string, number>()
    const points: { images: ReturnType<typeof disk.crashImages>; acked: Map<string, number> }[] = []
    disk.onMutation = () => {
      points.push({ images: disk.crashImages({ maxImages: 64 }), acked: new Map(acknowledged) })
    }
    const p = createJsonlPersistence({ root: '/r', fs: disk as FileSystem, dsyncWrites: true })
    await p.create(meta('c'))
    for (let t = 0; t < 3; t++) {
      await p.append('c', turn(t * 4, t))
      acknowledged = new Map(acknowledged).set('c', (t + 1) * 4)
    }
    await p.append('c', [{ seq: 12, type: 'turn/start', time: 1, data: { turn: 3 } }]) // left open
    acknowledged = new Map(acknowledged).set('c', 13)
    await p.close('c')
    await p.load('c') // repairs: closes the open turn
    await p.fork('c', { id: 'k', seedLength: 8 })
    acknowledged = new Map(acknowledged).set('k', 8)
    await p.closeAll()
    disk.onMutation = undefined
    expect(points.length).toBeGreaterThan(10)
    let states = 0
    for (const { images, acked } of points) {
      for (const image of images) {
        states++
        const after = createJsonlPersistence({ root: '/r', fs: createCrashFileSystem(image) })
        for (const [id, n] of acked) {
          const loaded = await after.inspect(id)
          expect(loaded.events.length).toBeGreaterThanOrEqual(n)
          expect(loaded.events.map((e) => e.seq)).toEqual(loaded.events.map((_, i) => i))
        }
      }
    }
    expect(states).toBeGreaterThan(points.length)
  })
})
