import { mkdir, readFile, readlink, readdir, unlink, utimes, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import type { SessionPersistenceError } from '../src/errors.js'
import type { StoreContext } from '../src/jsonl/store-context.js'
import type { FileSystem, OpenFlags } from '../src/jsonl/fs/file-system.js'
import { createNodeFileSystem } from '../src/jsonl/fs/node-file-system.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { type ClaimOptions, claimTakeover } from '../src/jsonl/lock/takeover.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { parseStartTime } from '../src/jsonl/lock/process-identity.js'
import { meta, turn } from './helpers/events.js'
import { rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

const STALE = 1000

afterEach(() => {
  vi.useRealTimers()
})

interface Who {
  pid: number
  startTime?: string
  host: string
  bootId: string
  pidNs: string
}

async function here(): Promise<Who> {
  return {
    pid: process.pid,
    startTime: parseStartTime(await readFile(`/proc/${process.pid}/stat`, 'utf8'))!,
    host: hostname(),
    bootId: (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(),
    pidNs: await readlink('/proc/self/ns/pid'),
  }
}

/** This host, but a process that no longer exists (our pid with another start time). */
async function deadHere(): Promise<Who> {
  const me = await here()
  return { ...me, startTime: String(Number(me.startTime) + 1) }
}

const elsewhere: Who = { pid: 4242, host: 'some-other-host', bootId: 'b-remote', pidNs: 'pid:[1]' }

async function setup(id: string) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, turn(0, 1))
  await p.closeAll()
  await mkdir(join(root, '.locks'), { recursive: true })
  return { root, dir: join(root, '.locks'), lock: join(root, '.locks', `${id}.lock`) }
}

async function plant(path: string, who: Who, token: string, content?: string) {
  const record = { ...who, since: Date.now(), staleLockMs: STALE, token }
  await writeFile(path, content ?? JSON.stringify(record))
}

describe.skipIf(process.platform !== 'linux')('a takeover marker left by a crash never blocks a session for long', () => {
  test('a marker whose maker is dead is stepped over at once; every marker is gone afterwards', async () => {
    const { root, dir, lock } = await setup('m1')
    await plant(lock, await deadHere(), 'deadlock')
    await plant(join(dir, '.takeover-deadlock'), await deadHere(), 'deadmarker')
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    expect((await p.load('m1')).events).toHaveLength(4)
    expect(JSON.parse(await readFile(lock, 'utf8')).token).not.toBe('deadlock')
    expect((await readdir(dir)).sort()).toEqual(['m1.lock'])
    await p.closeAll()
  })

  test('a marker from an unknown host blocks (E_LOCKED) until it is older than staleLockMs, then is stepped over', async () => {
    const { root, dir, lock } = await setup('m2')
    await plant(lock, await deadHere(), 'deadlock2')
    const marker = join(dir, '.takeover-deadlock2')
    await plant(marker, elsewhere, 'remotemarker')
    const made = Math.floor(Date.now() / 1000) * 1000 // whole seconds: exact on every file system
    await utimes(marker, new Date(made), new Date(made))
    vi.useFakeTimers({ toFake: ['Date'] })
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    vi.setSystemTime(made + STALE)
    const err = await rejection(p.load('m2'))
    expect(err.code).toBe('E_LOCKED')
    expect(err.message).toContain('taking over')
    // The instance taking over is named, not the dead holder of the stale lock.
    expect((err as SessionPersistenceError).holder).toMatchObject({ pid: elsewhere.pid, host: elsewhere.host })
    vi.setSystemTime(made + STALE + 1)
    expect((await p.load('m2')).events).toHaveLength(4)
    expect((await readdir(dir)).sort()).toEqual(['m2.lock'])
    await p.closeAll()
  })

  test('a marker of a live maker on this host blocks until it is older than staleLockMs', async () => {
    const { root, dir, lock } = await setup('m3')
    await plant(lock, await deadHere(), 'deadlock3')
    const marker = join(dir, '.takeover-deadlock3')
    await plant(marker, await here(), 'livemarker')
    // The clock is set, not left running: on a loaded machine a second can pass between the
    // plant and the load, and the marker was then already stale (as m2).
    const made = Math.floor(Date.now() / 1000) * 1000
    await utimes(marker, new Date(made), new Date(made))
    vi.useFakeTimers({ toFake: ['Date'] })
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    vi.setSystemTime(made + STALE)
    expect((await rejection(p.load('m3'))).code).toBe('E_LOCKED')
    vi.setSystemTime(made + STALE + 1)
    expect((await p.load('m3')).events).toHaveLength(4)
    await p.closeAll()
  })

  test('an empty or torn marker (only a crash leaves one) is stale at once', async () => {
    for (const content of ['', '{"pid":']) {
      const { root, dir, lock } = await setup('m4')
      await plant(lock, await deadHere(), 'deadlock4')
      await plant(join(dir, '.takeover-deadlock4'), elsewhere, 'x', content)
      const p = createJsonlPersistence({ root, staleLockMs: STALE })
      expect((await p.load('m4')).events).toHaveLength(4)
      expect((await readdir(dir)).sort()).toEqual(['m4.lock'])
      await p.closeAll()
    }
  })

  test('a chain of stale markers (each claim crashed in turn) is stepped over link by link', async () => {
    const { root, dir, lock } = await setup('m5')
    await plant(lock, await deadHere(), 'deadlock5')
    await plant(join(dir, '.takeover-deadlock5'), await deadHere(), 'first')
    await plant(join(dir, '.takeover-first'), await deadHere(), 'second')
    await plant(join(dir, '.takeover-second'), await deadHere(), 'third')
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    expect((await p.load('m5')).events).toHaveLength(4)
    expect((await readdir(dir)).sort()).toEqual(['m5.lock'])
    await p.closeAll()
  })

  test('a live claim further down the chain still blocks', async () => {
    const { root, dir, lock } = await setup('m6')
    await plant(lock, await deadHere(), 'deadlock6')
    await plant(join(dir, '.takeover-deadlock6'), await deadHere(), 'first6')
    const live = join(dir, '.takeover-first6')
    await plant(live, elsewhere, 'live6')
    // The clock is set (as in m2, m3): a second of a loaded machine must not age the live claim.
    const made = Math.floor(Date.now() / 1000) * 1000
    await utimes(live, new Date(made), new Date(made))
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(made + STALE)
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    const err = await rejection(p.load('m6'))
    expect(err.code).toBe('E_LOCKED')
    expect((err as SessionPersistenceError).holder).toMatchObject({ pid: elsewhere.pid, host: elsewhere.host })
    expect(JSON.parse(await readFile(lock, 'utf8')).token).toBe('deadlock6')
  })
})

/** The claim when claimTakeover got one, else undefined. */
async function claimOf(c: StoreContext, options: ClaimOptions) {
  const outcome = await claimTakeover(c, options)
  return outcome.kind === 'claimed' ? outcome.claim : undefined
}

describe('claimTakeover', () => {
  const ctx = (fs: FileSystem): StoreContext => ({
    fs,
    root: '/r',
    sync: 'data',
    dsyncWrites: false,
    logger: { warn() {} },
    knownDirs: new Set(),
    formatVersion: 1,
    redact: undefined,
  })
  const record = (token: string, who: Who = elsewhere) => ({ ...who, since: Date.now(), staleLockMs: STALE, token })
  const stale = { owner: record('stalelock'), ino: 7, mtimeMs: 0 }

  test('of many claimants racing for one stale lock, exactly one gets the claim', async () => {
    const c = ctx(createCrashFileSystem())
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        claimOf(c, { dir: '/r/.locks', stale, maker: record(`maker${i}`), isStale: async () => false }),
      ),
    )
    expect(claims.filter((x) => x !== undefined)).toHaveLength(1)
  })

  test('the losers of the race are told who is taking over: the maker of the live marker, not the stale lock\'s holder', async () => {
    const c = ctx(createCrashFileSystem())
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        claimTakeover(c, { dir: '/r/.locks', stale, maker: record(`maker${i}`), isStale: async () => false }),
      ),
    )
    const winner = outcomes.findIndex((o) => o.kind === 'claimed')
    expect(winner).toBeGreaterThanOrEqual(0)
    const losers = outcomes.filter((o) => o.kind !== 'claimed')
    expect(losers).toHaveLength(3)
    for (const o of losers) expect(o).toMatchObject({ kind: 'blocked', taker: { token: `maker${winner}` } })
  })

  test('a claim that someone stepped over as stale is no longer ours', async () => {
    const disk = createCrashFileSystem()
    const c = ctx(disk)
    const mine = await claimOf(c, { dir: '/r/.locks', stale, maker: record('slow'), isStale: async () => false })
    expect(await mine!.stillOurs()).toBe(true)
    // Another instance found our marker stale and stepped over it.
    const theirs = await claimOf(c, { dir: '/r/.locks', stale, maker: record('fast'), isStale: async () => true })
    expect(theirs).toBeDefined()
    expect(await mine!.stillOurs()).toBe(false)
    await theirs!.release()
    expect((await disk.readdir('/r/.locks')).map((e) => e.name)).toEqual([])
  })
})

test('a stalled claim, released late, leaves alone a marker another instance has claimed under the same name since', async () => {
  const disk = createCrashFileSystem()
  const c: StoreContext = { fs: disk, root: '/r', sync: 'data', dsyncWrites: false, logger: { warn() {} }, knownDirs: new Set(), formatVersion: 1, redact: undefined }
  const rec = (token: string) => ({ ...elsewhere, since: Date.now(), staleLockMs: STALE, token })
  const stale = { owner: rec('stalelock'), ino: 7, mtimeMs: 0 }
  const slow = await claimOf(c, { dir: '/r/.locks', stale, maker: rec('slow'), isStale: async () => false })
  const fast = await claimOf(c, { dir: '/r/.locks', stale, maker: rec('fast'), isStale: async () => true })
  await fast!.release() // gave up; the lock is still stale
  const again = await claimOf(c, { dir: '/r/.locks', stale, maker: rec('again'), isStale: async () => false })
  expect(again).toBeDefined()
  await slow!.release()
  expect((await disk.readdir('/r/.locks')).map((e) => e.name)).toEqual(['.takeover-stalelock'])
  const late = await claimOf(c, { dir: '/r/.locks', stale, maker: rec('late'), isStale: async () => false })
  expect(late).toBeUndefined() // the new claim still holds
})

describe.skipIf(process.platform !== 'linux')('review: takeover edge cases', () => {
  test('a chain of ten stale markers (ten claims crashed in turn) does not lock the session for good', async () => {
    const { root, dir, lock } = await setup('m7')
    await plant(lock, await deadHere(), 'deadlock7')
    let previous = 'deadlock7'
    for (let i = 0; i < 10; i++) {
      await plant(join(dir, `.takeover-${previous}`), await deadHere(), `crashed${i}`)
      previous = `crashed${i}`
    }
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    expect((await p.load('m7')).events).toHaveLength(4)
    expect((await readdir(dir)).sort()).toEqual(['m7.lock'])
    await p.closeAll()
  })

  test('a live claim that finishes while it is being read is not reported: the lock is looked at again (and taken when free)', async () => {
    const { root, dir, lock } = await setup('m9')
    await plant(lock, await deadHere(), 'deadlock9')
    const marker = join(dir, '.takeover-deadlock9')
    await plant(marker, elsewhere, 'live9')
    const real = createNodeFileSystem()
    let finished = false
    const fs: FileSystem = Object.assign(Object.create(real) as FileSystem, {
      async open(path: string, flags: OpenFlags, mode?: number) {
        if (path === marker && flags === 'r' && !finished) {
          // The other instance finishes just now: it replaced the lock, used it and closed.
          finished = true
          await unlink(marker)
          await unlink(lock)
        }
        return real.open(path, flags, mode)
      },
    })
    const p = createJsonlPersistence({ root, staleLockMs: STALE, fs })
    expect((await p.load('m9')).events).toHaveLength(4)
    expect(finished).toBe(true)
    expect((await readdir(dir)).sort()).toEqual(['m9.lock'])
    await p.closeAll()
  })

  test('a stale lock that its holder refreshes while the takeover is being claimed is not replaced', async () => {
    const { root, lock } = await setup('m8')
    await plant(lock, elsewhere, 'remote8')
    const old = new Date(Math.floor(Date.now() / 1000) * 1000 - 10 * STALE)
    await utimes(lock, old, old)
    // The remote holder wakes and refreshes its lock just as this instance publishes its claim.
    const real = createNodeFileSystem()
    const fs: FileSystem = Object.assign(Object.create(real) as FileSystem, {
      async link(from: string, to: string) {
        // (A minute ahead: still fresh however slowly this machine runs the next steps.)
        if (to.includes('.takeover-')) await utimes(lock, new Date(Date.now() + 60_000), new Date(Date.now() + 60_000))
        return real.link(from, to)
      },
    })
    const p = createJsonlPersistence({ root, staleLockMs: STALE, fs })
    expect((await rejection(p.load('m8'))).code).toBe('E_LOCKED')
    expect(JSON.parse(await readFile(lock, 'utf8')).token).toBe('remote8')
  })
})

describe.skipIf(process.platform !== 'linux')('two instances taking over one stale lock, one of them stalled', () => {
  test('a claimant stalled past its marker\'s staleLockMs, stepped over meanwhile, never replaces the lock: exactly one instance ends up holding it', async () => {
    const { root, dir, lock } = await setup('race')
    await plant(lock, elsewhere, 'remote-race')
    const old = new Date(Date.now() - 10 * STALE)
    await utimes(lock, old, old)
    const real = createNodeFileSystem()
    // A stalls right after publishing its claim; B stalls right before its rename over the lock.
    let releaseA!: () => void
    const gateA = new Promise<void>((r) => (releaseA = r))
    let aClaimed: string | undefined
    let aReached!: () => void
    const aAtGate = new Promise<void>((r) => (aReached = r))
    const fsA: FileSystem = Object.assign(Object.create(real) as FileSystem, {
      async link(from: string, to: string) {
        await real.link(from, to)
        if (to.includes('.takeover-') && aClaimed === undefined) {
          aClaimed = to
          aReached()
          await gateA
        }
      },
    })
    let releaseB!: () => void
    const gateB = new Promise<void>((r) => (releaseB = r))
    let bReached!: () => void
    const bAtGate = new Promise<void>((r) => (bReached = r))
    const fsB: FileSystem = Object.assign(Object.create(real) as FileSystem, {
      async rename(from: string, to: string) {
        if (to === lock) {
          bReached()
          await gateB
        }
        return real.rename(from, to)
      },
    })
    const a = createJsonlPersistence({ root, staleLockMs: STALE, fs: fsA })
    const b = createJsonlPersistence({ root, staleLockMs: STALE, fs: fsB })
    const outcome = (p: Promise<unknown>) => p.then(() => 'holds', (e: SessionPersistenceError) => e.code)
    const aLoad = outcome(a.load('race'))
    await aAtGate
    // A's claim ages past its staleLockMs while A stalls: B steps over it, claims, reaches its rename.
    await utimes(aClaimed!, old, old)
    const bLoad = outcome(b.load('race'))
    await bAtGate
    releaseA() // A wakes: its claim is no longer its own
    const aResult = await aLoad
    releaseB()
    const bResult = await bLoad
    expect([aResult, bResult]).toEqual(['E_LOCKED', 'holds'])
    expect(JSON.parse(await readFile(lock, 'utf8')).pid).toBe(process.pid)
    await b.closeAll()
    await a.closeAll()
    expect((await readdir(dir)).filter((n) => n.startsWith('.takeover-'))).toEqual([])
  })
})

describe('a lock refreshed "in the future" (its holder\'s clock runs ahead)', () => {
  test('regression: left unchanged for its staleLockMs as this instance sees it, it is taken over (it stayed locked until this clock caught up); one still refreshed is not', async () => {
    const { root, lock } = await setup('ahead')
    await plant(lock, elsewhere, 'remote-ahead')
    const ahead = new Date(Date.now() + 3_600_000) // an hour ahead
    await utimes(lock, ahead, ahead)
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    expect((await rejection(p.load('ahead'))).code).toBe('E_LOCKED') // first seen now
    // Still refreshed by its holder (its mtime moves on): never stale, however long.
    await new Promise((r) => setTimeout(r, STALE + 200))
    const later = new Date(Date.now() + 3_600_000)
    await utimes(lock, later, later)
    expect((await rejection(p.load('ahead'))).code).toBe('E_LOCKED')
    // Then left alone for its staleLockMs: its holder is gone.
    await new Promise((r) => setTimeout(r, STALE + 200))
    expect((await p.load('ahead')).events).toHaveLength(4)
    expect(JSON.parse(await readFile(lock, 'utf8')).token).not.toBe('remote-ahead')
    await p.closeAll()
  })
})
