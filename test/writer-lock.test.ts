import { fileURLToPath } from 'node:url'
import { type ChildProcess, spawn } from 'node:child_process'
import { readdir, readFile, unlink, utimes, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, type SessionEvent } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { rejection } from './helpers/codes.js'

afterEach(() => {
  vi.useRealTimers()
})

const WORKER = fileURLToPath(new URL('./fixtures/lock-worker.mjs', import.meta.url))


async function seeded(root: string, id: string) {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, turn(0, 1))
  await p.closeAll()
  return join(root, '.locks', `${id}.lock`)
}

function worker(args: string[]): { child: ChildProcess; result: Promise<Record<string, unknown>> } {
  const child = spawn(process.execPath, [WORKER, ...args], { stdio: ['pipe', 'pipe', 'inherit'] })
  const result = new Promise<Record<string, unknown>>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line)))
    child.once('exit', (code, signal) => reject(new Error(`worker exited ${code ?? signal} without a result`)))
  })
  return { child, result }
}

/** Ends every worker's stdin (a holder then closes and exits) and waits for all of them to exit. */
async function releaseAll(workers: { child: ChildProcess }[]) {
  await Promise.all(
    workers.map(({ child }) => {
      const exited = child.exitCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', r))
      child.stdin?.end()
      return exited
    }),
  )
}

function assertContiguous(events: readonly SessionEvent[]) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
}

describe('one writer per session, in one process', () => {
  test('a second instance gets E_LOCKED naming the holder; inspect and list neither take nor wait for the lock', async () => {
    const root = await tmpRoot()
    await seeded(root, 'held')
    const a = createJsonlPersistence({ root })
    await a.load('held')
    const b = createJsonlPersistence({ root })
    const err = await rejection(b.load('held'))
    expect(err.code).toBe('E_LOCKED')
    expect(err.message).toContain(`pid ${process.pid}`)
    expect(err.message).toContain(`host ${hostname()}`)
    expect(err.message).toMatch(/since \d{4}-\d\d-\d\dT/)
    expect((await b.inspect('held')).events).toHaveLength(4)
    expect(await b.list()).toHaveLength(1)
    expect((await rejection(b.fork('held', { id: 'held', seedLength: 0 }))).code).toBe('E_EXISTS')
    await a.closeAll()
    expect(await readdir(join(root, '.locks'))).toEqual([])
    expect((await b.load('held')).events).toHaveLength(4)
    await b.closeAll()
  })

  test('fork takes the child lock; a seedLength 0 fork takes it at the first append', async () => {
    const root = await tmpRoot()
    await seeded(root, 'parent')
    const a = createJsonlPersistence({ root })
    await a.fork('parent', { id: 'kid', seedLength: 4 })
    await a.fork('parent', { id: 'kid0', seedLength: 0 })
    expect((await readdir(join(root, '.locks'))).sort()).toEqual(['kid.lock'])
    await a.append('kid0', turn(0, 1))
    expect((await readdir(join(root, '.locks'))).sort()).toEqual(['kid.lock', 'kid0.lock'])
    expect((await rejection(createJsonlPersistence({ root }).load('kid'))).code).toBe('E_LOCKED')
    await a.closeAll()
  })

  test('a holder whose lock was removed by hand, or taken over, rejects its next append after the lease with E_LOCKED and writes nothing', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'lost')
    vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] })
    const a = createJsonlPersistence({ root })
    const loaded = await a.load('lost')
    const path = a.locate(loaded.meta).path
    await unlink(lock)
    vi.advanceTimersByTime(10_000 / 2 + 1) // past the lease (the default staleLockMs is 10000)
    const before = await readFile(path)
    expect((await rejection(a.append('lost', turn(4, 2)))).code).toBe('E_LOCKED')
    expect(await readFile(path)).toEqual(before)
    // B takes the (now absent) lock; A stays locked out even though a lock file exists again.
    const b = createJsonlPersistence({ root })
    await b.load('lost')
    expect((await rejection(a.append('lost', turn(4, 2)))).code).toBe('E_LOCKED')
    await b.append('lost', turn(4, 2))
    await a.closeAll() // must not remove B's lock
    expect(await readdir(join(root, '.locks'))).toEqual(['lost.lock'])
    await b.closeAll()
    const final = await createJsonlPersistence({ root }).inspect('lost')
    assertContiguous(final.events)
    expect(final.events).toHaveLength(8)
  })

  test('a lock from another host is respected until its heartbeat is older than its staleLockMs', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'remote')
    const foreign = { pid: 1, host: 'other-host', bootId: 'b', pidNs: 'n', since: Date.now(), staleLockMs: 1000, token: 'tok-remote' }
    await writeFile(lock, JSON.stringify(foreign))
    // Refreshed a minute from now: fresh however slowly this machine runs the next steps.
    const fresh = new Date(Date.now() + 60_000)
    await utimes(lock, fresh, fresh)
    const p = createJsonlPersistence({ root })
    const err = await rejection(p.load('remote'))
    expect(err.code).toBe('E_LOCKED')
    expect(err.message).toContain('pid 1 on host other-host')
    const old = new Date(Date.now() - 5000)
    await utimes(lock, old, old)
    expect((await p.load('remote')).events).toHaveLength(4)
    expect(JSON.parse(await readFile(lock, 'utf8')).pid).toBe(process.pid)
    await p.closeAll()
  })

  test('an empty or unreadable lock file is stale', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'garbled')
    for (const content of ['', '{"pid":', 'not json at all']) {
      await writeFile(lock, content)
      const p = createJsonlPersistence({ root })
      expect((await p.load('garbled')).events.length).toBeGreaterThan(0)
      await p.closeAll()
    }
  })
})

describe('one writer per session, across processes', () => {
  test('two processes racing to resume one session: exactly one writes, the other gets E_LOCKED (many rounds)', async () => {
    const root = await tmpRoot()
    await seeded(root, 'race')
    const rounds = 8
    for (let r = 0; r < rounds; r++) {
      // The winner holds the lock until told to stop, so the loser can only have lost the race.
      const workers = [worker([root, 'race', 'hold-until-eof']), worker([root, 'race', 'hold-until-eof'])]
      const results = await Promise.all(workers.map((w) => w.result))
      expect(results.filter((x) => x.held === true)).toHaveLength(1)
      expect(results.filter((x) => x.code === 'E_LOCKED')).toHaveLength(1)
      await releaseAll(workers)
    }
    const final = await createJsonlPersistence({ root }).inspect('race')
    assertContiguous(final.events)
    expect(final.events).toHaveLength(4 + rounds * 3)
    expect(final.repair).toBeUndefined()
  })

  test('a holder killed with SIGKILL is taken over at once, without waiting for staleLockMs', async () => {
    const root = await tmpRoot()
    await seeded(root, 'killed')
    const holder = worker([root, 'killed', 'hold', '0', '600000'])
    expect((await holder.result).held).toBe(true)
    const blocked = await worker([root, 'killed', 'resume', '0']).result
    expect(blocked.code).toBe('E_LOCKED')
    holder.child.kill('SIGKILL')
    await new Promise((r) => holder.child.once('exit', r))
    // The holder's staleLockMs is ten minutes and its lock is fresh: only its death lets this through.
    const next = await worker([root, 'killed', 'resume', '0', '600000']).result
    expect(next.ok).toBe(true)
    const final = await createJsonlPersistence({ root }).inspect('killed')
    assertContiguous(final.events)
    expect(final.events).toHaveLength(10)
  })

  test('several processes taking over one stale lock at once: exactly one wins', async () => {
    const root = await tmpRoot()
    const lock = await seeded(root, 'stale')
    for (let round = 0; round < 3; round++) {
      const stale = { pid: 1, host: 'gone-host', bootId: 'x', pidNs: 'y', since: 0, staleLockMs: 100, token: `dead-${round}` }
      await writeFile(lock, JSON.stringify(stale))
      const old = new Date(Date.now() - 10_000)
      await utimes(lock, old, old)
      const workers = Array.from({ length: 4 }, () => worker([root, 'stale', 'hold-until-eof']))
      const results = await Promise.all(workers.map((w) => w.result))
      expect(results.filter((x) => x.held === true)).toHaveLength(1)
      expect(results.filter((x) => x.code === 'E_LOCKED')).toHaveLength(3)
      await releaseAll(workers)
      await writeFile(lock, '') // leave a stale lock behind for the next round
    }
    const final = await createJsonlPersistence({ root }).inspect('stale')
    assertContiguous(final.events)
    expect(final.events).toHaveLength(4 + 3 * 3)
  })
})

describe('regressions', () => {
  test('a load that fails to find the log leaves no lock behind', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    expect((await rejection(p.load('absent'))).code).toBe('E_NOT_FOUND')
    expect(await readdir(join(root, '.locks')).catch(() => [])).toEqual([])
    await p.create(meta('absent'))
    await p.append('absent', turn(0, 1)) // would be E_LOCKED by its own leaked lock
    await p.closeAll()
    expect(await readdir(join(root, '.locks'))).toEqual([])
  })
})

describe('the lock temporary name', () => {
  test('a first append does not wait for the lock temporary name to go; close waits for it, and leaves none', async () => {
    const { createFaultInjectingFileSystem } = await import('../src/testing/index.js')
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    let letUnlinkGo!: () => void
    const gate = new Promise<void>((resolve) => (letUnlinkGo = resolve))
    fs.inject({ op: 'unlink', path: (p) => p.includes('/.locks/.tmp-'), times: 1, before: () => gate })
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('t'))
    await p.append('t', turn(0, 1)) // the temporary name's unlink is still held at the gate
    let closed = false
    const closing = p.close('t').then(() => (closed = true))
    // Give every other step of close (the log's close, the lock's stat and unlink: a few
    // thread-pool trips) ample turns of the event loop: only the held temporary name may keep
    // close from settling, and the lock file stays until it has.
    for (let i = 0; i < 50 && !closed; i++) await readdir(join(root, '.locks'))
    expect(closed).toBe(false)
    expect(await readdir(join(root, '.locks'))).toContain('t.lock')
    letUnlinkGo()
    await closing
    expect((await readdir(join(root, '.locks'))).filter((n) => n.startsWith('.tmp-'))).toEqual([])
  })
})
