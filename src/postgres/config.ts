import { hostname } from 'node:os'
import type pg from 'pg'
import { z } from 'zod'
import { describeZodError, SharedConfigSchema } from '../session/schema.js'
import { SessionPersistenceError } from '../errors.js'
import { safeParseConfig } from '../session/read-config.js'

/** Unquoted PostgreSQL identifiers only: the schema name is interpolated into SQL. */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/

/** The longest delay a Node.js timer takes (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1

const PoolSchema = z.custom<pg.Pool>(
  (v) => typeof v === 'object' && v !== null && typeof (v as { connect?: unknown }).connect === 'function',
  'pool must be a pg.Pool',
)

const { formatVersion, logger, redact } = SharedConfigSchema.shape

export const PostgresConfigSchema = z
  .object({
    connectionString: z.string().min(1).optional().describe('postgres:// URL; the backend opens and ends its own pool.'),
    pool: PoolSchema.optional().describe('A pg.Pool the caller owns: the backend never ends it.'),
    schema: z
      .string()
      .regex(IDENTIFIER, 'schema must be a lowercase unquoted identifier ([a-z_][a-z0-9_]*, at most 63 bytes)')
      .default('session_persistence'),
    schemaSetup: z
      .enum(['create', 'existing'])
      .default('create')
      .describe(
        "'create': the first operation creates the schema, or migrates it to this release's version. 'existing': " +
          'never any DDL (read-only tools, roles without CREATE): a missing schema is E_NOT_FOUND, one at an older ' +
          'version E_FORMAT_UNSUPPORTED until a store of this release (or a newer one) with create migrates it.',
      ),
    logger,
    host: z.string().min(1).default(hostname()).describe('The host identity recorded as a session\'s holder.'),
    poolSize: z.number().int().min(1).max(1000).default(16).describe('Connections of the pool it opens itself.'),
    appendStatements: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(2)
      .describe(
        'Append statements in flight at once. Batches of other sessions that arrive meanwhile share the next ' +
          'statement: one transaction, one WAL flush, each batch still fenced on its own.',
      ),
    watchPollMs: z
      .number()
      .int()
      .min(10)
      .default(2_000)
      .describe(
        'The safety poll of watch: how long a watcher waits for a notification before it reads its session anyway ' +
          '(a change made by an older release or by SQL sends none).',
      ),
    connectTimeoutMs: z
      .number()
      .int()
      .min(0)
      .max(MAX_TIMER_MS)
      .optional()
      .describe(
        'Longest wait for a new connection to be ready (TCP, TLS, authentication) before it fails as a connection ' +
          "error, on the pool it opens and on its lock and listening connections; 0 waits for ever. Default: the URL's " +
          'connect_timeout, else the environment\'s PGCONNECT_TIMEOUT (both in seconds, as libpq reads them), else 10 s. ' +
          'A pool the caller gives keeps its own settings.',
      ),
    retryTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(30_000)
      .describe(
        'How long a batch whose connection failed is retried before append rejects with E_IO; a watcher\'s read ' +
          'whose connection failed is retried as long before the watch rejects with E_IO.',
      ),
    formatVersion,
    redact,
  })
  .strict()
  .refine((c) => (c.connectionString === undefined) !== (c.pool === undefined), {
    message: 'give exactly one of connectionString and pool',
    path: ['connectionString'],
  })

export type PostgresConfig = z.input<typeof PostgresConfigSchema>
/** The configuration as the store uses it: `connectTimeoutMs` resolved (see `connectTimeout`). */
export type ResolvedPostgresConfig = z.output<typeof PostgresConfigSchema> & { connectTimeoutMs: number }

/** The default of `connectTimeoutMs` when neither the config nor the URL gives one. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000

export function parsePostgresConfig(config: unknown): ResolvedPostgresConfig {
  const parsed = safeParseConfig(PostgresConfigSchema, config, 'the PostgreSQL configuration')
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid PostgreSQL configuration: ${describeZodError(parsed.error)}`, {
      cause: parsed.error,
    })
  }
  return { ...parsed.data, connectTimeoutMs: connectTimeout(parsed.data) }
}

/**
 * How long the connections the store opens may take to connect: `connectTimeoutMs` if given;
 * else, with a caller's pool, the `connectionTimeoutMillis` it was made with; else the URL's
 * `connect_timeout`; else the environment's `PGCONNECT_TIMEOUT` (node-postgres reads neither:
 * libpq reads both, a connection string's parameter before the environment); else 10 s. 0: no limit.
 */
function connectTimeout(c: z.output<typeof PostgresConfigSchema>): number {
  if (c.connectTimeoutMs !== undefined) return c.connectTimeoutMs
  const options = c.pool?.options as pg.PoolConfig | undefined
  if (typeof options?.connectionTimeoutMillis === 'number') return options.connectionTimeoutMillis
  return urlConnectTimeout(c.connectionString ?? options?.connectionString) ?? envConnectTimeout() ?? DEFAULT_CONNECT_TIMEOUT_MS
}

/** The `connect_timeout` parameter of a postgres:// URL, in ms (see `libpqSeconds`). */
function urlConnectTimeout(connectionString: string | undefined): number | undefined {
  if (connectionString === undefined) return undefined
  let given: string | null
  try {
    given = new URL(connectionString).searchParams.get('connect_timeout')
  } catch {
    return undefined // not a URL (a socket directory, say): node-postgres reads it, or refuses it
  }
  return given === null ? undefined : libpqSeconds(given, `connect_timeout '${given}' in the URL`)
}

/**
 * `PGCONNECT_TIMEOUT` from the environment, in ms (see `libpqSeconds`). Set but empty is refused
 * as libpq refuses it (an empty value is no integer), not taken as unset.
 */
function envConnectTimeout(): number | undefined {
  const given = process.env.PGCONNECT_TIMEOUT
  return given === undefined ? undefined : libpqSeconds(given, `PGCONNECT_TIMEOUT '${given}' in the environment`)
}

/**
 * A connect timeout read as libpq reads it: whole seconds (spaces around them allowed), 0 or
 * less for no limit, 1 taken as 2 (libpq's minimum). Not an integer: `E_CONFIG` naming `what`.
 */
function libpqSeconds(given: string, what: string): number {
  if (!/^\s*[-+]?\d+\s*$/.test(given)) {
    throw new SessionPersistenceError('E_CONFIG', `invalid PostgreSQL configuration: ${what} is not a whole number of seconds`)
  }
  const seconds = Number(given)
  return seconds <= 0 ? 0 : Math.min(MAX_TIMER_MS, Math.max(2, seconds) * 1000)
}

/**
 * The `application_name` of every connection of a store of `host` (at most 63 bytes, as the
 * server keeps it): operators see whose connections these are in pg_stat_activity (and can
 * terminate them), and E_LOCKED reads the host of a lock's holder from it (session-row.ts).
 */
export function applicationNameOf(host: string): string {
  return `${APPLICATION_NAME_PREFIX}${host}`.slice(0, 63)
}

export const APPLICATION_NAME_PREFIX = 'session-persistence-jsonl '

/**
 * The server a store connects to, for messages: its connection string without the password
 * (nor its query), or the host, port and database of a caller's pool.
 */
export function describeServer(c: Pick<ResolvedPostgresConfig, 'connectionString' | 'pool'>): string {
  const given = c.connectionString ?? (c.pool?.options as pg.PoolConfig | undefined)?.connectionString
  if (given !== undefined) {
    try {
      const url = new URL(given)
      url.password = ''
      url.search = ''
      url.hash = '' // a '#' in an unescaped password starts a fragment that holds the rest of it
      return url.toString()
    } catch {
      return given.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@').replace(/password\s*=\s*\S+/gi, 'password=***')
    }
  }
  const o = (c.pool?.options ?? {}) as pg.PoolConfig
  return `the caller's pool (${o.host ?? 'default host'}:${o.port ?? 'default port'}, database ${o.database ?? 'default'})`
}
