import { describeLocation } from '../session/location.js'
import { metaFromHeader } from '../session/meta.js'
import { listingOrder } from '../session/read-options.js'
import { isSessionPersistenceError } from '../errors.js'
import type { ListProblem, PostgresLocation, SessionListing } from '../persistence.js'
import type { Db } from './db.js'
import { parseStoredHeader } from './read-session.js'

// Headers only, in one query: no event row is read. `updated_at` is the last write (every
// append statement sets it), and what `mtimeMs` reports. With a limit, the database keeps only
// the first `limit` rows of its sort (a top-N heap sort over the sessions table, which carries
// no index on updated_at so that appends stay HOT updates) and sends only their headers. Ties
// are broken by id in byte order ("C"): the sessions of one append statement share its
// transaction's now(); the rows tied with the last one kept are then read too (TIES). A query for more rows (bad ones were met) starts after the last row it
// had, by its sort key (`key`, exact as text), not at an offset: a session written meanwhile
// moves up out of the way, and no row is skipped or listed twice.
/** The column a listing sorts on, its type, and what each query selects of a row. */
const sortedBy = (s: string, orderBy: 'createdAt' | 'lastWrite') => {
  const key = orderBy === 'lastWrite' ? 'updated_at' : 'created_at'
  const cast = orderBy === 'lastWrite' ? 'timestamptz' : 'bigint'
  const select = `
  SELECT session_id, header_line, size_bytes::float8 AS size_bytes,
         (extract(epoch FROM updated_at) * 1000)::float8 AS mtime_ms, ${key}::text AS sort_key
    FROM "${s}".sessions`
  return { key, cast, select }
}

const LIST = (s: string, orderBy: 'createdAt' | 'lastWrite', limited: boolean, after: boolean) => {
  const { key, cast, select } = sortedBy(s, orderBy)
  return `${select}
   ${after ? `WHERE ${key} < $2::${cast} OR (${key} = $2::${cast} AND session_id COLLATE "C" > $3)` : ''}
   ORDER BY ${key} DESC, session_id COLLATE "C"
   ${limited ? 'LIMIT $1' : ''}`
}

// The rows after `$2` in byte order that share its sort key `$1`: with a limit, the last row kept
// may tie with rows the cut left out, and which of them come first is decided in UTF-16 order
// (as on the other backends), which byte order does not follow (U+FF01 before U+1F600 in UTF-16,
// after it in UTF-8). They are read, sorted with the others, and the cut is made then.
const TIES = (s: string, orderBy: 'createdAt' | 'lastWrite') => {
  const { key, cast, select } = sortedBy(s, orderBy)
  return `${select}
   WHERE ${key} = $1::${cast} AND session_id COLLATE "C" > $2
   ORDER BY session_id COLLATE "C"`
}

interface Row {
  session_id: string
  header_line: string
  size_bytes: number
  mtime_ms: number
  sort_key: string
}

export interface ListOrder {
  orderBy: 'createdAt' | 'lastWrite'
  limit: number | undefined
}

/**
 * The stored sessions with a valid header, in the order asked for (§4.6 newest `createdAt`
 * first, or §15.4 newest last write first; then by id), at most `limit` of them; bad rows go to
 * `onProblem` and are skipped (not counted against `limit`).
 */
export async function listSessions(
  db: Db,
  schema: string,
  onProblem: (p: ListProblem) => void,
  order: ListOrder = { orderBy: 'createdAt', limit: undefined },
): Promise<SessionListing[]> {
  const { orderBy, limit } = order
  const listings: SessionListing[] = []
  /** Adds the rows with a valid header to `listings`; the others go to `onProblem`. Returns how many were bad. */
  const take = (rows: readonly Row[]): number => {
    let bad = 0
    for (const row of rows) {
      const location: PostgresLocation = { kind: 'postgres', schema, id: row.session_id }
      const path = describeLocation(location)
      try {
        const header = parseStoredHeader(row.header_line, row.session_id, path)
        listings.push({ meta: metaFromHeader(header), location, sizeBytes: row.size_bytes, mtimeMs: row.mtime_ms })
      } catch (err) {
        bad++
        onProblem({
          path,
          code: isSessionPersistenceError(err) ? err.code : 'E_CORRUPT',
          message: (err as Error).message,
        })
      }
    }
    return bad
  }
  // A bad row does not count against the limit (as on the JSONL backend): as many rows after the
  // last one read are read for each one reported, which is rare.
  // With a limit, one row more than wanted is asked for: it tells whether the last row kept ties
  // with rows the cut leaves out (rare: then those are read too, and the cut is made in JS).
  let tied: Row | undefined // the last row kept, when it ties with the first row cut off
  for (let after: Row | undefined, want = limit; want === undefined || want > 0; ) {
    const values = want === undefined ? [] : after ? [want + 1, after.sort_key, after.session_id] : [want + 1]
    const { rows } = await db.query<Row>(LIST(schema, orderBy, want !== undefined, after !== undefined), values)
    const next = want !== undefined && rows.length > want ? rows.pop() : undefined
    const bad = take(rows)
    if (next === undefined) break
    after = rows[rows.length - 1]!
    want = bad
    if (want === 0 && next.sort_key === after.sort_key) tied = after
  }
  // The same order as the other backends (UTF-16 comparison of ids), whatever the collation.
  if (tied === undefined) return listings.sort(listingOrder(orderBy))
  take((await db.query<Row>(TIES(schema, orderBy), [tied.sort_key, tied.session_id])).rows)
  return listings.sort(listingOrder(orderBy)).slice(0, limit)
}
