import pg from 'pg'
import type { Logger } from '../session/schema.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'

/** SQLSTATE classes that mean the connection or the server went away, not that SQL failed. */
const CONNECTION_STATES = /^(08|57P0[1-3]|53300)/

/**
 * True when an error says the connection failed rather than the statement: a socket error
 * (ECONNRESET, ECONNREFUSED while the server restarts), node-postgres's connection errors, or a
 * shutdown / cannot-connect-now / too-many-connections state. Such a failure during COMMIT leaves its outcome
 * unknown: the caller must find out, never simply write again.
 */
export function isConnectionError(err: unknown): boolean {
  if (isSessionPersistenceError(err)) return false
  const code = (err as { code?: unknown } | null)?.code
  // node-postgres's own errors carry no code: "Connection terminated unexpectedly", "… is not
  // queryable", "timeout exceeded when trying to connect". Anything else is a bug, not retried.
  if (typeof code !== 'string') return /connection|queryable|timeout/i.test(String((err as Error | null)?.message))
  if (/^E[A-Z]+$/.test(code)) return true // ECONNRESET, ECONNREFUSED, EPIPE, ETIMEDOUT…
  return CONNECTION_STATES.test(code)
}

/** The pool a backend queries through, with `synchronous_commit` on for every connection it uses. */
export class Db {
  readonly pool: pg.Pool
  readonly owned: boolean
  readonly logger: Logger
  readonly #ready = new WeakSet<pg.PoolClient>()
  #fsyncChecked = false

  constructor(pool: pg.Pool, { owned, logger }: { owned: boolean; logger: Logger }) {
    this.pool = pool
    this.owned = owned
    this.logger = logger
    guardClients(pool)
  }

  /**
   * A pool of our own: at most `size` connections, idle clients' errors never crash the host,
   * each connection given `connectTimeoutMs` (0: no limit) to be ready (`server` names it then).
   */
  static open(
    connectionString: string,
    size: number,
    logger: Logger,
    applicationName: string,
    { connectTimeoutMs, server }: { connectTimeoutMs: number; server: string },
  ): Db {
    const pool = new pg.Pool({
      connectionString,
      max: size,
      application_name: applicationName,
      // Durability is promised per acknowledged batch: never inherit an `off` from the role.
      options: '-c synchronous_commit=on',
      // The limit goes to each client, not to the pool: a pool's `connectionTimeoutMillis` would
      // also fail a request that merely waits for a busy pool's next free connection.
      Client: timedClient(connectTimeoutMs),
    })
    pool.on('error', () => {}) // an idle connection that dies is replaced on next use
    const db = new Db(pool, { owned: true, logger })
    db.#connectTimeout = { ms: connectTimeoutMs, server }
    return db
  }

  /** Our own pool's limit on connecting, to name in a timeout. */
  #connectTimeout: { ms: number; server: string } | undefined

  /** Runs `fn` on one connection; a connection that failed is destroyed, not reused. */
  async with<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch((err: unknown) => {
      throw this.#connectTimeout ? connectFailure(err, this.#connectTimeout.ms, this.#connectTimeout.server) : err
    })
    let broken: unknown
    try {
      if (!this.#ready.has(client)) {
        guard(client) // one the caller's pool connected before this store guarded it
        // A caller's pool may hand out connections set up with anything, and on our own pool a
        // connection string's `options` parameter replaces our startup option: enforce it here.
        await client.query('SET synchronous_commit = on')
        this.#ready.add(client)
      }
      return await fn(client)
    } catch (err) {
      if (isConnectionError(err)) broken = err
      throw err
    } finally {
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true)
    }
  }

  /** One statement; with `name`, a prepared statement (parsed and planned once per connection). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    return this.with((c) => (name === undefined ? c.query<R>(text, values) : c.query<R>({ name, text, values })))
  }

  /** One transaction; rolled back when `fn` throws. */
  transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.with(async (client) => {
      await client.query('BEGIN')
      try {
        const result = await fn(client)
        await client.query('COMMIT')
        return result
      } catch (err) {
        if (!isConnectionError(err)) await client.query('ROLLBACK').catch(() => {})
        throw err
      }
    })
  }

  /** Warns once when the server does not flush its WAL: a server crash would lose acknowledged batches. */
  async checkFsync(): Promise<void> {
    if (this.#fsyncChecked) return
    this.#fsyncChecked = true
    const { rows } = await this.query<{ fsync: string }>('SHOW fsync')
    if (rows[0]?.fsync === 'off') {
      this.logger.warn(
        'the PostgreSQL server runs with fsync = off: a server crash or power loss can lose acknowledged batches',
      )
    }
  }

  async end(): Promise<void> {
    if (this.owned) await this.pool.end()
  }
}

/** The pools whose new connections are guarded already (a caller's pool may serve several stores). */
const guardedPools = new WeakSet<pg.Pool>()
/** The connections that have our 'error' listener. */
const guardedClients = new WeakSet<pg.ClientBase>()

/**
 * A connection that dies while checked out, or just as it is handed out, emits 'error': the
 * failed query reports it, so the event itself must never crash the host (an EventEmitter
 * throws an 'error' nobody listens to). Attached in the pool's 'connect' event, which pg-pool
 * emits synchronously in `_acquireClient` before it removes its own idle listener: a listener
 * attached after `await pool.connect()` came too late for a server that sends ReadyForQuery
 * and a FATAL (pg_terminate_backend, a fast shutdown) in one chunk, whose 'error' is emitted
 * in the same tick, before the awaiting code runs. On a caller's pool too, once per pool.
 */
function guardClients(pool: pg.Pool): void {
  if (guardedPools.has(pool)) return
  guardedPools.add(pool)
  pool.on('connect', guard)
}

function guard(client: pg.ClientBase): void {
  if (guardedClients.has(client)) return
  guardedClients.add(client)
  client.on('error', () => {})
}

/**
 * A `pg.Client` that gives up connecting after `ms` (node-postgres's `connectionTimeoutMillis`;
 * it ignores a URL's `connect_timeout`): without a limit, a server that accepts the TCP
 * connection and never answers (a hung host, a black-holing firewall) hangs every operation.
 */
export function timedClient(ms: number): typeof pg.Client {
  return class TimedClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super({ ...(typeof config === 'string' ? { connectionString: config } : config), connectionTimeoutMillis: ms })
    }
  }
}

/**
 * node-postgres's connect timeout (`timeout expired`, no code) as a connection error that says
 * what happened: `ETIMEDOUT`, so `isConnectionError` retries it where connection errors are.
 * Anything else is returned as it is.
 */
export function connectFailure(err: unknown, ms: number, server: string): unknown {
  const e = err as { code?: unknown; message?: unknown } | null
  if (ms > 0 && e?.code === undefined && /^timeout expired$|connection timeout/i.test(String(e?.message))) {
    return Object.assign(new Error(`timed out connecting to ${server} (no answer within ${ms} ms)`, { cause: err }), { code: 'ETIMEDOUT' })
  }
  return err
}

/** Wraps anything that is not already ours as `E_IO`, naming what failed. */
export function dbError(err: unknown, what: string, sessionId?: string): SessionPersistenceError {
  if (isSessionPersistenceError(err)) return err
  const e = err as { code?: unknown; message?: unknown }
  const code = typeof e?.code === 'string' ? `${e.code}: ` : ''
  return new SessionPersistenceError('E_IO', `${what} failed: ${code}${String(e?.message ?? err)}`, {
    sessionId,
    cause: err,
  })
}

/**
 * Runs an operation that is safe to repeat (a read, taking a lock on a fresh connection) again
 * after a connection failure, until `deadline`.
 */
export async function retrying<T>(deadline: number, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      if (!isConnectionError(err) || Date.now() >= deadline) throw err
      await backoff(attempt)
    }
  }
}

/** Backoff between retries of a failed connection: 50 ms doubling to 1 s; over at once when `signal` aborts. */
export function backoff(attempt: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, Math.min(1000, 50 * 2 ** attempt))
    signal?.addEventListener('abort', done, { once: true })
  })
}
