import { SessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import type { Logger } from '../session/schema.js'
import type { SessionStore } from '../persistence.js'

/** A session root the CLI works on, whatever backend holds it. */
export interface OpenedRoot {
  readonly store: SessionStore
  /** How messages name the root: its directory, or its URL without the password. */
  readonly name: string
  /** The directory of a JSONL root (for raw file reads and temporary files); undefined otherwise. */
  readonly directory: string | undefined
  /** Releases every lock and connection the CLI took; call it once, before exiting. */
  close(): Promise<void>
}

export const DEFAULT_PG_SCHEMA = 'session_persistence'

/** The PostgreSQL entry point, typed (erased at run time; loaded only for a `postgres://` root). */
type PostgresModule = typeof import('../postgres/index.js')

// A computed specifier: the CLI builds and runs without the PostgreSQL backend, or without its
// optional peer `pg`, until someone names a PostgreSQL root.
const POSTGRES_ENTRY = '../postgres/index.js'

export function isPostgresUrl(root: string): boolean {
  return /^postgres(ql)?:\/\//i.test(root)
}

/** The connection string (without `schema`) and the schema a PostgreSQL root URL names. */
export function parsePostgresUrl(root: string): { connectionString: string; schema: string; name: string } {
  let url: URL
  try {
    url = new URL(root)
  } catch (err) {
    throw new SessionPersistenceError('E_CONFIG', `not a valid PostgreSQL URL: ${redact(root)}`, { cause: err })
  }
  const given = url.searchParams.get('schema')
  if (given !== null && given.length === 0) throw new SessionPersistenceError('E_CONFIG', `empty ?schema= in ${redact(root)}`)
  const schema = given ?? DEFAULT_PG_SCHEMA
  url.searchParams.delete('schema')
  const shown = new URL(url.toString())
  shown.password = ''
  return { connectionString: url.toString(), schema, name: `${shown.toString()} (schema ${schema})` }
}

function redact(root: string): string {
  return root.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@')
}

/**
 * Opens the root named by `--root`, `SESSION_JSONL_ROOT` or `--to`: a `postgres://` or
 * `postgresql://` URL selects the PostgreSQL backend (schema from `?schema=NAME`), anything else
 * is a JSONL directory. Opening does no I/O; the first command does.
 *
 * A PostgreSQL schema is created or migrated only with `create` (the target of `copy`, as a copy
 * into a new directory creates it): on any other root a mistyped `?schema=` is `E_NOT_FOUND`,
 * never an empty root made on the spot, and a schema an older release left is refused
 * (`E_FORMAT_UNSUPPORTED`), never migrated (DDL, exclusive locks) by a command that reads it.
 */
export async function openRoot(root: string, logger: Logger, { create = false }: { create?: boolean } = {}): Promise<OpenedRoot> {
  if (!isPostgresUrl(root)) {
    const store = createJsonlPersistence({ root, logger })
    return { store, name: store.root, directory: store.root, close: () => store.closeAll() }
  }
  const { connectionString, schema, name } = parsePostgresUrl(root)
  let mod: PostgresModule
  try {
    mod = (await import(POSTGRES_ENTRY)) as PostgresModule
  } catch (err) {
    throw new SessionPersistenceError(
      'E_CONFIG',
      `a PostgreSQL root needs the PostgreSQL backend and its optional peer dependency pg (npm install pg): ${(err as Error).message}`,
      { cause: err },
    )
  }
  const store = mod.createPostgresPersistence({ connectionString, schema, logger, schemaSetup: create ? 'create' : 'existing' })
  let closed: Promise<void> | undefined
  return {
    store,
    name,
    directory: undefined,
    close: () =>
      (closed ??= (async () => {
        try {
          await store.closeAll()
        } finally {
          await store.end()
        }
      })()),
  }
}
