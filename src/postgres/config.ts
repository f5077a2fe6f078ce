import { hostname } from 'node:os'
import type pg from 'pg'
import { z } from 'zod'
import { describeZodError, SharedConfigSchema } from '../session/schema.js'
import { SessionPersistenceError } from '../errors.js'

/** Unquoted PostgreSQL identifiers only: the schema name is interpolated into SQL. */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/

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
    retryTimeoutMs: z
      .number()
      .int()
      .min(0)
      .default(30_000)
      .describe('How long a batch whose connection failed is retried before append rejects with E_IO.'),
    formatVersion,
    redact,
  })
  .strict()
  .refine((c) => (c.connectionString === undefined) !== (c.pool === undefined), {
    message: 'give exactly one of connectionString and pool',
    path: ['connectionString'],
  })

export type PostgresConfig = z.input<typeof PostgresConfigSchema>
export type ResolvedPostgresConfig = z.output<typeof PostgresConfigSchema>

export function parsePostgresConfig(config: unknown): ResolvedPostgresConfig {
  const parsed = PostgresConfigSchema.safeParse(config)
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid PostgreSQL configuration: ${describeZodError(parsed.error)}`, {
      cause: parsed.error,
    })
  }
  return parsed.data
}

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
      return url.toString()
    } catch {
      return given.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@').replace(/password\s*=\s*\S+/gi, 'password=***')
    }
  }
  const o = (c.pool?.options ?? {}) as pg.PoolConfig
  return `the caller's pool (${o.host ?? 'default host'}:${o.port ?? 'default port'}, database ${o.database ?? 'default'})`
}
