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
