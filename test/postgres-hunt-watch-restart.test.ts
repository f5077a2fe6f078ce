// watch across a brief server restart (§15.3: a watch ends only when its session is deleted or
// on abort): the writers ride out the outage through `retryTimeoutMs`, and so does a watcher,
// which then goes on with the later events, each once, none missed. A watcher whose reads keep
// failing for longer than `retryTimeoutMs` rejects E_IO, as an append would. The safety poll is
// a minute where the test needs what comes to arrive by the feed; the deadlines below only bound
// a wait for what must come.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import pg from 'pg'
import { createPostgresPersistence, type PostgresSessionPersistence, type PostgresConfig } from '../src/postgres/index.js'
import type { SessionEvent } from '../src/session/schema.js'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../src/torture/postgres-server.js'
import { pgRequired } from './helpers/pg-required.js'

// These tests crash their server, so they start a private one (never SPJ_PG_URL's).
const unavailable = throwawayPostgresUnavailable()
if (unavailable && pgRequired()) throw new Error(`PostgreSQL restart tests cannot run here and must (CI): ${unavailable}`)
if (unavailable) console.warn(`PostgreSQL restart tests skipped: ${unavailable}`)

const quiet = { warn() {}, info() {}, error() {}, debug() {} }
const ev = (seq: number): SessionEvent => ({ seq, type: 'note', time: 1 })
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function collect(iterable: AsyncIterable<SessionEvent>) {
  const seen: number[] = []
  const ended = (async () => {
    try {
      for await (const e of iterable) seen.push(e.seq)
      return 'ended'
    } catch (err) {
      return `rejected ${(err as { code?: string }).code}`
    }
  })()
  return {
    seen,
    ended,
    async until(n: number, ms = 30_000) {
      const deadline = Date.now() + ms
      while (seen.length < n && Date.now() < deadline) await sleep(10)
      return seen
    },
    endedWithin(ms: number) {
      return Promise.race([ended, sleep(ms).then(() => 'still running')])
    },
  }
}

describe.skipIf(unavailable !== undefined)('watch across a server restart (PostgreSQL)', () => {
  let server: ThrowawayPostgres
  const stores: PostgresSessionPersistence[] = []
  const open = (schema: string, extra: Partial<PostgresConfig> = {}) => {
    const store = createPostgresPersistence({ connectionString: server.url, schema, logger: quiet, ...extra } as PostgresConfig)
    stores.push(store)
    return store
  }
  beforeAll(async () => {
    server = await startThrowawayPostgres()
  })
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.end().catch(() => {})))
    await server?.stop()
  })

  test('a brief restart: the watcher rides it out and yields the later events, each once', async () => {
    const writer = open('restart', { host: 'A', retryTimeoutMs: 60_000 })
    const watcher = open('restart', { host: 'W', retryTimeoutMs: 60_000, watchPollMs: 60_000 })
    await writer.create({ id: 'x', createdAt: 1, delegationDepth: 0 })
    await writer.append('x', [ev(0)])
    const abort = new AbortController()
    const w = collect(watcher.watch('x', { signal: abort.signal }))
    expect(await w.until(1)).toEqual([0])
    await writer.append('x', [ev(1)])
    expect(await w.until(2)).toEqual([0, 1])
    await server.crash()
    await sleep(1000)
    await server.start()
    await writer.append('x', [ev(2)]) // rides out the restart through retryTimeoutMs
    expect(await w.until(3)).toEqual([0, 1, 2])
    await writer.append('x', [ev(3)])
    expect(await w.until(4)).toEqual([0, 1, 2, 3])
    expect(await w.endedWithin(0)).toBe('still running')
    abort.abort()
    expect(await w.ended).toBe('ended')
    expect(w.seen).toEqual([0, 1, 2, 3])
  })

  test('a watcher that reads while the server is down waits for it, and an abort ends it meanwhile', async () => {
    const writer = open('down_abort', { host: 'A', retryTimeoutMs: 60_000 })
    // A safety poll of 100 ms: the watcher reads while the server is down.
    const watcher = open('down_abort', { host: 'W', retryTimeoutMs: 60_000, watchPollMs: 100 })
    await writer.create({ id: 'y', createdAt: 1, delegationDepth: 0 })
    await writer.append('y', [ev(0)])
    const abort = new AbortController()
    const w = collect(watcher.watch('y', { signal: abort.signal }))
    expect(await w.until(1)).toEqual([0])
    await server.crash()
    try {
      await sleep(1500) // several safety polls against the stopped server
      expect(await w.endedWithin(0)).toBe('still running')
      abort.abort()
      expect(await w.endedWithin(20_000)).toBe('ended') // well before its 60 s of retries
    } finally {
      await server.start()
    }
    expect(w.seen).toEqual([0])
  })

  test('a watch that is its store\'s first call, started while the server is down, waits for it and goes on', async () => {
    // A hunt's find: the store's first preparation of its schema reported the refused connection
    // as E_IO, which the watch did not take for a connection failure: it rejected at once.
    const writer = open('fresh_down', { host: 'A', retryTimeoutMs: 60_000 })
    await writer.create({ id: 'f', createdAt: 1, delegationDepth: 0 })
    await writer.append('f', [ev(0)])
    const watcher = open('fresh_down', { host: 'W', retryTimeoutMs: 60_000, watchPollMs: 60_000 }) // never called yet
    await server.crash()
    let w: ReturnType<typeof collect>
    try {
      w = collect(watcher.watch('f'))
      await sleep(1500)
      expect(await w.endedWithin(0)).toBe('still running')
    } finally {
      await server.start()
    }
    expect(await w.until(1)).toEqual([0])
    await writer.append('f', [ev(1)])
    expect(await w.until(2)).toEqual([0, 1])
  })

  test('a server down for longer than retryTimeoutMs: the watch rejects E_IO', async () => {
    const writer = open('down_long', { host: 'A' })
    const watcher = open('down_long', { host: 'W', retryTimeoutMs: 500, watchPollMs: 100 })
    await writer.create({ id: 'z', createdAt: 1, delegationDepth: 0 })
    await writer.append('z', [ev(0)])
    const w = collect(watcher.watch('z'))
    expect(await w.until(1)).toEqual([0])
    await server.crash()
    try {
      expect(await w.endedWithin(30_000)).toBe('rejected E_IO')
    } finally {
      await server.start()
    }
    expect(w.seen).toEqual([0])
  })

  test('only the listening connection terminated: the watcher listens again and is woken for what changed meanwhile', async () => {
    const writer = open('listen_kill', { host: 'A' })
    // The safety poll is a minute: what comes within the deadline below came by the feed.
    const watcher = open('listen_kill', { host: 'LK', watchPollMs: 60_000 })
    await writer.create({ id: 'v', createdAt: 1, delegationDepth: 0 })
    await writer.append('v', [ev(0)])
    const abort = new AbortController()
    const w = collect(watcher.watch('v', { signal: abort.signal }))
    expect(await w.until(1)).toEqual([0])
    // Connected to another database: the store's own is closed to new connections below.
    const admin = new pg.Client({ connectionString: server.url.replace(/\/spj$/, '/postgres') })
    await admin.connect()
    try {
      // The watch's first read does not wait for the feed: wait until it listens.
      const listening = `FROM pg_stat_activity WHERE application_name = 'session-persistence-jsonl LK' AND query LIKE 'LISTEN%'`
      for (let t = Date.now(); Date.now() - t < 10_000; await sleep(20)) {
        if ((await admin.query(`SELECT 1 ${listening}`)).rows.length > 0) break
      }
      // No new connection from now on, so the feed cannot listen again until the append below
      // has committed: its notification reaches nobody, and only the feed's catch-up wake, once
      // it listens again, tells the watcher (the connections open already stay open).
      await admin.query('ALTER DATABASE spj ALLOW_CONNECTIONS false')
      const { rows } = await admin.query<{ t: boolean }>(
        // Waits (up to 10 s) until the backend is gone, so that it delivers no notification of the append.
        `SELECT pg_terminate_backend(pid, 10000) AS t ${listening}`,
      )
      expect(rows.map((r) => r.t)).toEqual([true])
      await writer.append('v', [ev(1)])
      await sleep(300) // the feed tries to listen again meanwhile, and is refused
      expect(w.seen).toEqual([0])
    } finally {
      await admin.query('ALTER DATABASE spj ALLOW_CONNECTIONS true')
      await admin.end()
    }
    expect(await w.until(2)).toEqual([0, 1])
    abort.abort()
    expect(await w.ended).toBe('ended')
  })
})
