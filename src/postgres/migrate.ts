import { SessionPersistenceError } from '../errors.js'
import { backoff, type Db } from './db.js'
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js'

// Every host migrating the same schema queues on this transaction-scoped lock (keyed by the
// schema's name), so two hosts never apply the same migration twice.
const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('session-persistence-jsonl/migrate/' || $1, 0))`

/** SQLSTATEs of a lock wait cut short by `lock_timeout`, and of a deadlock: both rolled back, both retried. */
const STEP_ASIDE = new Set(['55P03', '40P01'])

const BOOTSTRAP = (s: string) => `
  CREATE SCHEMA IF NOT EXISTS "${s}";
  CREATE TABLE IF NOT EXISTS "${s}".schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  );
`

/** How a migration waits for its table locks; see `migrate`. */
export interface MigrateOptions {
  /**
   * Longest wait for each table lock of an attempt before it steps aside (default 500 ms).
   * Other hosts' statements on that table queue behind the waiting attempt meanwhile.
   */
  lockTimeoutMs?: number
  /** When to stop retrying attempts that could not get their locks (epoch ms; default 60 s from now). */
  deadline?: number
}

/**
 * Brings `schema` to SCHEMA_VERSION, one migration per transaction, under the lock. A schema
 * written by a newer release is refused (`E_FORMAT_UNSUPPORTED`) and left untouched.
 *
 * A migration that alters a table needs an exclusive lock on it, and while it waits for one,
 * every other host's appends and reads of that table queue behind it. So each lock is waited for
 * at most `lockTimeoutMs`; then the attempt rolls back, steps aside (a warning through the
 * logger) and tries again after a backoff, until `deadline`. A long read elsewhere makes the
 * others wait at most that long per attempt, instead of for as long as it lasts.
 */
export async function migrate(db: Db, schema: string, options: MigrateOptions = {}): Promise<void> {
  const lockTimeoutMs = options.lockTimeoutMs ?? 500
  const deadline = options.deadline ?? Date.now() + 60_000
  // Fast path, without any lock or DDL (a read-only role can use an up-to-date schema).
  const table = await db.query<{ t: boolean }>('SELECT to_regclass($1) IS NOT NULL AS t', [`"${schema}".schema_migrations`])
  if (table.rows[0]?.t) {
    const { rows } = await db.query<{ v: number | null }>(`SELECT max(version) AS v FROM "${schema}".schema_migrations`)
    if (checkVersion(schema, rows[0]?.v ?? 0)) return
  }
  for (let attempt = 0; ; ) {
    let done: boolean
    try {
      done = await db.transaction(async (client) => {
        await client.query(LOCK, [schema])
        await client.query(BOOTSTRAP(schema))
        const { rows } = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM "${schema}".schema_migrations`)
        const current = rows[0]?.v ?? 0
        if (checkVersion(schema, current)) return true
        await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`)
        await client.query(MIGRATIONS[current]!(schema))
        await client.query(`INSERT INTO "${schema}".schema_migrations (version) VALUES ($1)`, [current + 1])
        return current + 1 === SCHEMA_VERSION
      })
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code
      if (typeof code !== 'string' || !STEP_ASIDE.has(code) || Date.now() >= deadline) throw err
      db.logger.warn(
        `PostgreSQL schema "${schema}": a migration could not take its table locks within ${lockTimeoutMs} ms (long ` +
          'reads or writes elsewhere) and stepped aside; trying again',
      )
      await backoff(attempt++)
      continue
    }
    if (done) return
  }
}

/**
 * What a store that never creates or migrates (`schemaSetup: 'existing'`) checks instead of
 * `migrate`, without any lock or DDL: `schema` must exist (else `E_NOT_FOUND` naming it and
 * `server`) at this release's version. An older version (0: a schema without our tables) is
 * `E_FORMAT_UNSUPPORTED`, as a newer one is: left untouched, for a store that migrates to bring
 * up to date.
 */
export async function requireSchema(db: Db, schema: string, server: string): Promise<void> {
  const { rows } = await db.query<{ s: boolean; t: boolean }>(
    'SELECT to_regnamespace($1) IS NOT NULL AS s, to_regclass($2) IS NOT NULL AS t',
    [`"${schema}"`, `"${schema}".schema_migrations`],
  )
  if (!rows[0]?.s) {
    throw new SessionPersistenceError('E_NOT_FOUND', `no PostgreSQL schema "${schema}" at ${server} (and this store creates none)`)
  }
  let current = 0
  if (rows[0].t) {
    const version = await db.query<{ v: number | null }>(`SELECT max(version) AS v FROM "${schema}".schema_migrations`)
    current = version.rows[0]?.v ?? 0
  }
  if (checkVersion(schema, current)) return
  throw new SessionPersistenceError(
    'E_FORMAT_UNSUPPORTED',
    `PostgreSQL schema "${schema}" at ${server} is at version ${current}${current === 0 ? ' (it has no session tables)' : ''}, ` +
      `older than this release's ${SCHEMA_VERSION}; this store never migrates (schemaSetup 'existing'): let a store of ` +
      'this release or a newer one that does (the default) migrate it first',
  )
}

/** True when `current` is this release's version; throws for a newer one. */
function checkVersion(schema: string, current: number): boolean {
  if (current > SCHEMA_VERSION) {
    throw new SessionPersistenceError(
      'E_FORMAT_UNSUPPORTED',
      `PostgreSQL schema "${schema}" is at version ${current}; this release knows versions up to ${SCHEMA_VERSION}`,
    )
  }
  return current === SCHEMA_VERSION
}
