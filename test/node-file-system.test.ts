import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createNodeFileSystem } from '../src/index.js'

// The default seam drives descriptors through Node's callback API; these are the guarantees
// fs.promises.FileHandle gave for free and the handle must keep.
describe('the default file-system seam', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'spj-nodefs-'))
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  it('writes, reads, truncates and stats through one handle', async () => {
    const fs = createNodeFileSystem()
    const path = join(dir, 'f')
    const h = await fs.open(path, 'wx', 0o600)
    expect(await h.write(Buffer.from('hello world'), 0, 11, 0)).toBe(11)
    await h.datasync()
    await h.truncate(5)
    await h.sync()
    const st = await h.stat()
    expect(st.size).toBe(5)
    expect(st.isFile).toBe(true)
    await h.close()
    const r = await fs.open(path, 'r+')
    const buf = Buffer.alloc(8)
    expect(await r.read(buf, 0, 8, 0)).toBe(5)
    expect(buf.toString('utf8', 0, 5)).toBe('hello')
    await r.close()
    expect(readFileSync(path, 'utf8')).toBe('hello')
  })

  it('rejects the system error of a failed call with its code', async () => {
    const fs = createNodeFileSystem()
    await (await fs.open(join(dir, 'f'), 'wx', 0o600)).close()
    await expect(fs.open(join(dir, 'f'), 'wx', 0o600)).rejects.toMatchObject({ code: 'EEXIST' })
    await expect(fs.open(join(dir, 'missing'), 'r')).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('a call Node refuses outright rejects, and close still completes', async () => {
    const fs = createNodeFileSystem()
    const h = await fs.open(join(dir, 'f'), 'wx', 0o600)
    await expect(h.write(Buffer.from('x'), 0, 5, 0)).rejects.toMatchObject({ code: 'ERR_OUT_OF_RANGE' })
    await h.close() // would wait forever if the refused call still counted as in flight
    await expect(h.truncate(0)).rejects.toMatchObject({ code: 'EBADF' })
  })

  it('lets calls in flight finish before closing, and refuses calls after close with EBADF', async () => {
    const fs = createNodeFileSystem()
    const path = join(dir, 'f')
    const h = await fs.open(path, 'wx', 0o600)
    const data = Buffer.alloc(1 << 20, 0x61)
    const write = h.write(data, 0, data.length, 0) // in flight when close is called
    const closed = h.close()
    expect(await write).toBe(data.length)
    await closed
    expect(readFileSync(path).length).toBe(data.length)
    await expect(h.write(data, 0, 1, 0)).rejects.toMatchObject({ code: 'EBADF' })
    await expect(h.datasync()).rejects.toMatchObject({ code: 'EBADF', syscall: 'fdatasync' })
    await h.close() // closing twice is a no-op, never a second close(2) of a reused number
    const other = await fs.open(path, 'r')
    const buf = Buffer.alloc(1)
    expect(await other.read(buf, 0, 1, 0)).toBe(1)
    await other.close()
  })
  it('syncs a directory through a descriptor it always closes, and rejects a missing one ENOENT', async () => {
    const fs = createNodeFileSystem()
    const open = () => readdirSync('/proc/self/fd').length
    const before = open()
    for (let i = 0; i < 50; i++) await fs.syncDir(dir)
    await expect(fs.syncDir(join(dir, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' })
    expect(open()).toBe(before)
  })
})
