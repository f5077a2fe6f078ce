import { changeChannel, changePayload } from './change-feed.js'
import type { Db } from './db.js'

/** What `deleteSession` did. `lastWriteMs` is the row's last write, as `list` reports it. */
export type DeleteOutcome = { kind: 'deleted' } | { kind: 'missing' } | { kind: 'written-since'; lastWriteMs: number }

// The same expression `list` reports as `mtimeMs`, so a time taken from a listing compares
// exactly equal to the row it came from (timestamptz keeps microseconds: the value has a fraction).
const LAST_WRITE_MS = '(extract(epoch FROM updated_at) * 1000)::float8'

// The session's watchers are notified (change-feed.ts) in the same transaction: they end once it commits.
const DELETE = (s: string) => `
  WITH deleted AS (DELETE FROM "${s}".sessions WHERE session_id = $1 RETURNING session_id)
  SELECT pg_notify($2, $3) FROM deleted`

/**
 * Removes a session's row, and with it (by the schema's trigger, migrations.ts) its lines;
 * durable at COMMIT. With `ifLastWriteAtOrBefore`, the row is read and locked in the same
 * transaction first, and left as it is when it was written after that time.
 */
export async function deleteSession(db: Db, schema: string, id: string, ifLastWriteAtOrBefore?: number): Promise<DeleteOutcome> {
  if (ifLastWriteAtOrBefore === undefined) {
    const { rows } = await db.query(DELETE(schema), [id, changeChannel(schema), changePayload(id)])
    return rows.length === 1 ? { kind: 'deleted' } : { kind: 'missing' }
  }
  return db.transaction(async (client) => {
    const { rows } = await client.query<{ last_write_ms: number }>(
      `SELECT ${LAST_WRITE_MS} AS last_write_ms FROM "${schema}".sessions WHERE session_id = $1 FOR UPDATE`,
      [id],
    )
    const row = rows[0]
    if (!row) return { kind: 'missing' }
    if (row.last_write_ms > ifLastWriteAtOrBefore) return { kind: 'written-since', lastWriteMs: row.last_write_ms }
    await client.query(DELETE(schema), [id, changeChannel(schema), changePayload(id)])
    return { kind: 'deleted' }
  })
}

/** Whether a session is stored. */
export async function sessionExists(db: Db, schema: string, id: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM "${schema}".sessions WHERE session_id = $1`, [id])
  return rows.length === 1
}
