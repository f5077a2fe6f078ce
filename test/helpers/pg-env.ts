import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'

/** The server's URL, or undefined after printing one line saying why the PostgreSQL tests skip. */
export function pgUrl(): string | undefined {
  const url = inject('pgUrl')
  if (!url) {
    console.warn(`PostgreSQL tests skipped: ${inject('pgUnavailable')}`)
    return undefined
  }
  return url
}

/** A schema name no other test uses, so test files can share one server. */
export function freshSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`
}

/** Drops the schemas a test file created. */
export async function dropSchemas(url: string, schemas: Iterable<string>): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  } finally {
    await client.end()
  }
}

/** One query on a short-lived connection of its own. */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string, values?: unknown[]): Promise<R[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<R>(text, values)).rows
  } finally {
    await client.end()
  }
}

/** The stored lines of a session, in seq order, with their seqs. */
export async function storedLines(url: string, schema: string, id: string): Promise<{ seq: number; line: string }[]> {
  return sql<{ seq: number; line: string }>(
    url,
    `SELECT seq::float8 AS seq, line FROM "${schema}".events WHERE session_id = $1 ORDER BY seq`,
    [id],
  )
}
