import { type ChildProcess, spawn } from 'node:child_process'
import { link, readFile, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createMemoryPersistence, MemoryStore } from '../src/memory/memory-persistence.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../src/errors.js'
import { meta, turn } from './helpers/events.js'
import { rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

// SPEC 9: an E_LOCKED error carries `holder: { pid, host, since }` as a field, not only in its message.

const WORKER = fileURLToPath(new URL('./fixtures/lock-worker.mjs', import.meta.url))
const children: ChildProcess[] = []

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

async function seeded(root: string, id: string) {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, turn(0, 1))
  await p.closeAll()
  return join(root, '.locks', `${id}.lock`)
}

/** The holder as the lock file records it. */
async function lockRecord(path: string): Promise<{ pid: number; host: string; since: number }> {
  const { pid, host, since } = JSON.parse(await readFile(path, 'utf8')) as { pid: number; host: string; since: number }
  return { pid, host, since }
}

describe('E_LOCKED names its holder as a field (JSONL)', () => {
  test('a second instance in this process gets the holder recorded in the lock: pid, host, since (epoch ms)', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'held')
    const a = createJsonlPersistence({ root })
    const before = Date.now()
    await a.load('held')
    const after = Date.now()
    const b = createJsonlPersistence({ root })
    const err = await rejection(b.load('held'))
    expect(isSessionPersistenceError(err, 'E_LOCKED')).toBe(true)
    const holder = (err as SessionPersistenceError).holder
    expect(holder).toEqual(await lockRecord(lock))
    expect(holder?.pid).toBe(process.pid)
    expect(holder?.host).toBe(hostname())
    expect(holder?.since).toBeGreaterThanOrEqual(before)
    expect(holder?.since).toBeLessThanOrEqual(after)
    // append and fork into the locked id name the same holder
    const appendErr = (await rejection(b.append('held', turn(4, 2)))) as SessionPersistenceError
    expect(appendErr.code).toBe('E_NOT_FOUND') // b never opened it: not E_LOCKED, no holder
    expect(appendErr.holder).toBeUndefined()
    await a.closeAll()
    // released: b now takes it, and a third instance sees b as the holder
    await b.load('held')
    const c = createJsonlPersistence({ root })
    const again = (await rejection(c.load('held'))) as SessionPersistenceError
    expect(again.code).toBe('E_LOCKED')
    expect(again.holder).toEqual(await lockRecord(lock))
    expect(again.holder?.since).toBeGreaterThanOrEqual(after)
    await b.closeAll()
  })

  test.skipIf(process.platform === 'win32')('another process holding the lock is named by its pid, host and since', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'other')
    const child = spawn(process.execPath, [WORKER, root, 'other', 'hold-until-eof', '0'], { stdio: ['pipe', 'pipe', 'inherit'] })
    children.push(child)
    const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>))
      child.once('exit', (code, signal) => reject(new Error(`worker exited ${code ?? signal}`)))
    })
    expect(line.held).toBe(true)
    const p = createJsonlPersistence({ root })
    const err = (await rejection(p.load('other'))) as SessionPersistenceError
    expect(err.code).toBe('E_LOCKED')
    expect(err.holder?.pid).toBe(child.pid)
    expect(err.holder?.host).toBe(hostname())
    expect(err.holder).toEqual(await lockRecord(lock))
    const exited = new Promise((r) => child.once('exit', r))
    child.stdin!.end()
    await exited
    expect((await p.load('other')).events).toHaveLength(7) // the worker's turn is there, and the lock is free
    await p.closeAll()
  })

  test('a holder whose lock was taken from it gets E_LOCKED naming the new holder at its next append', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'stolen')
    const a = createJsonlPersistence({ root, staleLockMs: 1000 })
    await a.load('stolen')
    // By hand: the one thing that breaks single-writer on one host. The old inode is kept alive
    // under another name, so the new lock cannot reuse its number.
    await link(lock, `${lock}.kept`)
    await unlink(lock)
    const b = createJsonlPersistence({ root, staleLockMs: 1000 })
    await b.load('stolen')
    await new Promise((r) => setTimeout(r, 700)) // past staleLockMs / 2: a's next append confirms its lease
    const err = (await rejection(a.append('stolen', turn(4, 2)))) as SessionPersistenceError
    expect(err.code).toBe('E_LOCKED')
    expect(err.holder).toEqual(await lockRecord(lock))
    expect(err.holder?.pid).toBe(process.pid)
    expect((await b.inspect('stolen')).events).toHaveLength(4) // a wrote nothing
    await a.closeAll()
    await b.closeAll()
  })
})

describe('E_LOCKED names its holder as a field (in-memory)', () => {
  test('a second instance over the same store gets this process as the holder', async () => {
    const store = new MemoryStore()
    const a = createMemoryPersistence({ store })
    await a.create(meta('m'))
    const before = Date.now()
    await a.append('m', turn(0, 1))
    const b = createMemoryPersistence({ store })
    const err = (await rejection(b.load('m'))) as SessionPersistenceError
    expect(err.code).toBe('E_LOCKED')
    expect(err.holder?.pid).toBe(process.pid)
    expect(err.holder?.host).toBe(hostname())
    expect(err.holder?.since).toBeGreaterThanOrEqual(before - 1000)
    expect(err.holder?.since).toBeLessThanOrEqual(Date.now())
    await a.closeAll()
  })

  test('bad inputs are not E_LOCKED and carry no holder', async () => {
    const a = createMemoryPersistence()
    const err = (await rejection(a.load(''))) as SessionPersistenceError
    expect(err.code).toBe('E_INVALID_ID')
    expect(err.holder).toBeUndefined()
  })
})
