import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { meta, turn } from './helpers/events.js'
import { codeOf } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

async function seeded(root: string, id: string, turns = 1) {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  for (let t = 0; t < turns; t++) await p.append(id, turn(t * 4, t))
  await p.closeAll()
  return p.locate(meta(id)).path
}

describe('delete', () => {
  test('removes the log and leaves no lock; the id can be created again', async () => {
    const root = await tmpRoot()
    const path = await seeded(root, 'gone')
    const p = createJsonlPersistence({ root })
    await p.delete('gone')
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' })
    expect(await codeOf(p.load('gone'))).toBe('E_NOT_FOUND')
    expect(await p.list()).toEqual([])
    expect(await readdir(join(root, '.locks'))).toEqual([])
    await p.create(meta('gone'))
    await p.append('gone', turn(0, 5))
    await p.closeAll()
    expect((await createJsonlPersistence({ root }).inspect('gone')).events).toHaveLength(4)
  })

  test('is durable when it resolves: no power cut afterwards brings the log back', async () => {
    const disk = createCrashFileSystem()
    const p = createJsonlPersistence({ root: '/r', fs: disk })
    await p.create(meta('durable'))
    await p.append('durable', turn(0, 1))
    await p.close('durable')
    await p.delete('durable')
    for (const image of disk.crashImages()) {
      const after = createJsonlPersistence({ root: '/r', fs: createCrashFileSystem(image) })
      expect(await codeOf(after.inspect('durable'))).toBe('E_NOT_FOUND')
    }
  })

  test('E_NOT_FOUND when there is no log, E_INVALID_ID for a bad id', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    expect(await codeOf(p.delete('never'))).toBe('E_NOT_FOUND')
    expect(await codeOf(p.delete(''))).toBe('E_INVALID_ID')
    expect(await codeOf(p.delete('x'.repeat(300)))).toBe('E_INVALID_ID')
    // A created session with no event has no log either, but this instance has it open.
    await p.create(meta('fresh'))
    expect(await codeOf(p.delete('fresh'))).toBe('E_SESSION_LIVE')
  })

  test('E_SESSION_LIVE while this instance has it open; after close it can be deleted', async () => {
    const root = await tmpRoot()
    const path = await seeded(root, 'open')
    const p = createJsonlPersistence({ root })
    await p.load('open')
    expect(await codeOf(p.delete('open'))).toBe('E_SESSION_LIVE')
    expect((await stat(path)).isFile()).toBe(true)
    await p.append('open', turn(4, 2)) // still open and writable
    await p.close('open')
    await p.delete('open')
    await expect(stat(path)).rejects.toMatchObject({ code: 'ENOENT' })
  })

  test('E_LOCKED while another instance holds its lock; the log is untouched', async () => {
    const root = await tmpRoot()
    const path = await seeded(root, 'held')
    const holder = createJsonlPersistence({ root })
    await holder.load('held')
    const p = createJsonlPersistence({ root })
    expect(await codeOf(p.delete('held'))).toBe('E_LOCKED')
    expect((await stat(path)).isFile()).toBe(true)
    await holder.append('held', turn(4, 2))
    await holder.closeAll()
    // The failed delete took nothing: the session is free again.
    expect((await p.load('held')).events).toHaveLength(8)
    await p.closeAll()
  })

  test('forks of a deleted session keep their copied seed and stay loadable', async () => {
    const root = await tmpRoot()
    await seeded(root, 'parent', 2)
    const p = createJsonlPersistence({ root })
    await p.fork('parent', { id: 'child', seedLength: 4 })
    await p.append('child', turn(4, 9))
    await p.closeAll()
    await p.delete('parent')
    const child = await p.load('child')
    expect(child.events).toHaveLength(8)
    expect(child.meta.parentSession).toBe('parent')
    expect(child.repair).toBeUndefined()
    await p.closeAll()
  })
})
