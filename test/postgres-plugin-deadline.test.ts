// A PostgreSQL server paused with SIGSTOP (SPEC 8, v0.3): the plugin's flush and dispose with a
// deadline reject with E_TIMEOUT in about the deadline instead of waiting forever, and once the
// server runs again every event the host emitted is stored, in order, exactly once.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isSessionPersistenceError, type SessionPersistenceError } from '../src/errors.js'
import { sessionPersistencePlugin } from '../src/plugin/plugin.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { createReferenceHost } from '../src/testing/reference-host.js'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../src/torture/postgres-server.js'
import { storedLines } from './helpers/pg-env.js'
import { pgRequired } from './helpers/pg-required.js'
import { oneTurn } from './helpers/plugin-setup.js'

// This test pauses its server, so it always starts a private one (never SPJ_PG_URL's).
const unavailable = throwawayPostgresUnavailable()
if (unavailable && pgRequired()) throw new Error(`PostgreSQL deadline tests cannot run here and must (CI): ${unavailable}`)
if (unavailable) console.warn(`PostgreSQL deadline tests skipped: ${unavailable}`)

const DEADLINE = 1_000
const LATE = 20_000

/** The postmaster and every process it started (backends, WAL writer, checkpointer…). */
function serverPids(server: ThrowawayPostgres): number[] {
  const postmaster = Number(readFileSync(join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0])
  const children: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === postmaster) children.push(Number(name))
    } catch {
      // gone meanwhile
    }
  }
  return [postmaster, ...children]
}

function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {
      // exited
    }
  }
}

async function timed(p: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const t0 = performance.now()
  try {
    await p
    return { ms: performance.now() - t0, error: undefined }
  } catch (error) {
    return { ms: performance.now() - t0, error }
  }
}

describe.skipIf(unavailable !== undefined)('plugin deadlines over a PostgreSQL server paused with SIGSTOP', () => {
  let server: ThrowawayPostgres
  let store: PostgresSessionPersistence
  let paused: number[] = []
  beforeAll(async () => {
    server = await startThrowawayPostgres()
    store = createPostgresPersistence({ connectionString: server.url, schema: 'deadline', retryTimeoutMs: 60_000 })
  })
  afterAll(async () => {
    signalAll(paused, 'SIGCONT') // never leave a stopped server behind
    paused = []
    await store?.end()
    await server?.stop()
  })

  test('flush and dispose reject E_TIMEOUT in about the deadline; after SIGCONT every event is stored once, in order', async () => {
    const plugin = sessionPersistencePlugin({ persistence: store, flushDelayMs: 10_000 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const host = createReferenceHost({ cwd: '/project' })
    await plugin.apply(host)
    const s = host.startSession({ id: 'paused' })
    s.runTurn(oneTurn(1))
    await plugin.flush('paused')

    paused = serverPids(server)
    expect(paused.length).toBeGreaterThan(1)
    signalAll(paused, 'SIGSTOP')
    s.runTurn(oneTurn(2)) // drains at once: the append goes to a server that does not answer

    const f = await timed(plugin.flush('paused', { timeoutMs: DEADLINE }))
    expect(isSessionPersistenceError(f.error, 'E_TIMEOUT')).toBe(true)
    expect(f.ms).toBeGreaterThanOrEqual(DEADLINE - 50)
    expect(f.ms).toBeLessThan(LATE)
    s.runTurn(oneTurn(3)) // buffered while the server is stopped

    const d = await timed(plugin.dispose({ timeoutMs: DEADLINE }))
    expect(d.error).toBeInstanceOf(AggregateError)
    expect((d.error as AggregateError).errors.map((e: SessionPersistenceError) => `${e.sessionId}:${e.code}`)).toEqual(['paused:E_TIMEOUT'])
    expect(d.ms).toBeLessThan(LATE)

    signalAll(paused, 'SIGCONT')
    paused = []
    // The batch in flight when the server stopped lands once it runs again, exactly once.
    // Events that arrived after dispose began (turn 3's) are the ones dispose reported.
    const parsed = async () =>
      (await storedLines(server.url, 'deadline', 'paused')).map((l) => {
        const { crc: _crc, ...event } = JSON.parse(l.line) as Record<string, unknown>
        return event
      })
    const turnTwoEnd = s.events.findLastIndex((e) => e.type === 'turn/end' && (e.data as { turn?: number }).turn === 2)
    await expect.poll(async () => (await parsed()).length, { timeout: LATE, interval: 200 }).toBeGreaterThanOrEqual(turnTwoEnd + 1)
    const stored = await parsed()
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i))
    expect(stored).toEqual(JSON.parse(JSON.stringify(s.events.slice(0, stored.length))))
    // The session's lock is released once the backend answered: another instance can load it.
    const other = createPostgresPersistence({ connectionString: server.url, schema: 'deadline' })
    try {
      await expect.poll(async () => (await timed(other.load('paused'))).error, { timeout: LATE, interval: 200 }).toBeUndefined()
      expect((await other.inspect('paused')).events.length).toBeGreaterThanOrEqual(stored.length)
    } finally {
      await other.end()
    }
  })
})
