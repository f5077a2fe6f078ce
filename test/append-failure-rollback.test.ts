import { readFile, stat } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, jsonlPath } from '../src/index.js'
import { createFaultInjectingFileSystem } from '../src/testing/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { codeOf } from './helpers/codes.js'

async function setup() {
  const root = await tmpRoot()
  const fs = createFaultInjectingFileSystem()
  const p = createJsonlPersistence({ root, fs })
  await p.create(meta('w'))
  const first = turn(0, 1)
  await p.append('w', first)
  const path = p.locate(meta('w')).path
  return { root, fs, p, path, first, acked: await readFile(path) }
}

describe('a failed append is rolled back (docs/contract.md §5.2)', () => {
  for (const [op, code] of [
    ['write', 'EIO'],
    ['write', 'ENOSPC'],
    ['datasync', 'EIO'],
    ['datasync', 'EDQUOT'],
  ] as const) {
    test(`${code} on ${op}: E_IO with the cause, file cut back to its acknowledged length, same batch retried`, async () => {
      const { fs, p, path, first, acked } = await setup()
      const second = turn(4, 2)
      const undo = fs.inject({ op, path, code, times: 1 })
      let err: unknown
      await p.append('w', second).catch((e) => (err = e))
      expect(isSessionPersistenceError(err, 'E_IO')).toBe(true)
      expect((err as { cause: { code: string } }).cause.code).toBe(code)
      expect(await readFile(path)).toEqual(acked)
      expect(fs.calls.filter((c) => c.op === 'truncate').map((c) => c.detail)).toEqual([acked.length])
      undo()
      await p.append('w', second) // the next seq did not move
      await p.closeAll()
      expect((await p.load('w')).events).toEqual([...first, ...second])
      await p.closeAll()
    })
  }

  test('a failed write after a partial write leaves no partial line behind', async () => {
    const { fs, p, path, acked } = await setup()
    fs.shortWrites = true
    fs.inject({ op: 'write', path, code: 'ENOSPC', skip: 1, times: 1 })
    expect(await codeOf(p.append('w', turn(4, 2)))).toBe('E_IO')
    expect(await readFile(path)).toEqual(acked)
    await p.closeAll()
  })

  test('when the rollback fails too, the writer is broken until the session is closed and loaded again', async () => {
    const { fs, p, path, first, acked } = await setup()
    const undoSync = fs.inject({ op: 'datasync', path, code: 'EIO', times: 1 })
    const undoTrunc = fs.inject({ op: 'truncate', path, code: 'EIO', times: 1 })
    const second = turn(4, 2)
    expect(await codeOf(p.append('w', second))).toBe('E_IO')
    undoSync()
    undoTrunc()
    expect(await codeOf(p.append('w', second))).toBe('E_WRITER_BROKEN')
    expect(await codeOf(p.append('w', turn(8, 3)))).toBe('E_WRITER_BROKEN')
    expect((await stat(path)).size).toBeGreaterThan(acked.length) // the unacknowledged bytes are still there
    await p.close('w')
    const reloaded = await p.load('w') // reconciles from disk: the unacknowledged batch happens to be whole
    expect(reloaded.events.slice(0, 4)).toEqual(first)
    await p.append('w', turn(reloaded.events.length, 9))
    await p.closeAll()
  })

  test('a failed materialization leaves no log and no temporary file; the retry works', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('m'))
    for (const op of ['write', 'datasync', 'link', 'syncDir'] as const) {
      const undo = fs.inject({ op, path: (x) => !x.includes('.locks'), code: 'EIO', times: 1 })
      expect(await codeOf(p.append('m', turn(0, 1)))).toBe('E_IO')
      undo()
      expect(await p.list()).toEqual([])
    }
    await p.append('m', turn(0, 1))
    const [listing] = await p.list()
    expect(listing?.meta.id).toBe('m')
    const { readdir } = await import('node:fs/promises')
    expect((await readdir(jsonlPath(listing!.location).replace(/\/[^/]+$/, ''))).filter((n) => n.startsWith('.'))).toEqual([])
    await p.closeAll()
  })

  test('a file system without hard links → E_LINK_UNSUPPORTED naming the root', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    fs.inject({ op: 'link', path: (x) => x.endsWith('.jsonl'), code: 'EPERM' })
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('nolink'))
    let err: unknown
    await p.append('nolink', turn(0, 1)).catch((e) => (err = e))
    expect(isSessionPersistenceError(err, 'E_LINK_UNSUPPORTED')).toBe(true)
    expect((err as { path: string }).path).toBe(p.root)
    expect((err as Error).message).toContain(p.root)
    await p.closeAll()
  })

  test('another writer publishing the same id first → E_EXISTS, nothing overwritten', async () => {
    const root = await tmpRoot()
    const a = createJsonlPersistence({ root })
    const b = createJsonlPersistence({ root })
    await a.create(meta('race'))
    await b.create(meta('race'))
    await a.append('race', turn(0, 1))
    const path = a.locate(meta('race')).path
    const bytes = await readFile(path)
    await a.close('race')
    expect(await codeOf(b.append('race', turn(0, 7)))).toBe('E_EXISTS')
    expect(await readFile(path)).toEqual(bytes)
    await b.closeAll()
  })
})

describe('close', () => {
  test('a log whose close fails: E_IO with the cause, the lock is released all the same, the session can be loaded again', async () => {
    const { root, fs, p, path, first } = await setup()
    const undo = fs.inject({ op: 'close', path, code: 'EIO', times: 1 })
    let err: unknown
    await p.close('w').catch((e) => (err = e))
    undo()
    expect(isSessionPersistenceError(err, 'E_IO')).toBe(true)
    expect((err as { cause: { code: string } }).cause.code).toBe('EIO')
    // Released: another instance takes the lock at once and reads every acknowledged event.
    const other = createJsonlPersistence({ root })
    expect((await other.load('w')).events).toEqual(first)
    await other.closeAll()
  })
})
