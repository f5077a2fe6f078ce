import { describeLocation } from '../session/location.js'
import { metaFromHeader } from '../session/meta.js'
import { isSessionPersistenceError } from '../errors.js'
import type { ListProblem, PostgresLocation, SessionListing } from '../persistence.js'
import type { Db } from './db.js'
import { parseStoredHeader } from './read-session.js'

// Headers only, in one query: no event row is read.
const LIST = (s: string) => `
  SELECT session_id, header_line, size_bytes::float8 AS size_bytes,
         (extract(epoch FROM updated_at) * 1000)::float8 AS mtime_ms
    FROM "${s}".sessions
   ORDER BY created_at DESC, session_id`

interface Row {
  session_id: string
  header_line: string
  size_bytes: number
  mtime_ms: number
}

/** Every stored session with a valid header, newest first then by id; bad rows go to `onProblem`. */
export async function listSessions(db: Db, schema: string, onProblem: (p: ListProblem) => void): Promise<SessionListing[]> {
  const { rows } = await db.query<Row>(LIST(schema))
  const listings: SessionListing[] = []
  for (const row of rows) {
    const location: PostgresLocation = { kind: 'postgres', schema, id: row.session_id }
    const path = describeLocation(location)
    try {
      const header = parseStoredHeader(row.header_line, row.session_id, path)
      listings.push({ meta: metaFromHeader(header), location, sizeBytes: row.size_bytes, mtimeMs: row.mtime_ms })
    } catch (err) {
      onProblem({
        path,
        code: isSessionPersistenceError(err) ? err.code : 'E_CORRUPT',
        message: (err as Error).message,
      })
    }
  }
  // The same order as the JSONL backend (UTF-16 comparison of ids), whatever the collation.
  return listings.sort(
    (a, b) => b.meta.createdAt - a.meta.createdAt || (a.meta.id < b.meta.id ? -1 : a.meta.id > b.meta.id ? 1 : 0),
  )
}
