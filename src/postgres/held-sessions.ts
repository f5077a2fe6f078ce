import type { Db } from './db.js'
import { sessionKey } from './lock-connection.js'

/**
 * Registered symbol of the store's `heldSessions` (not part of `SessionPersistence`): the CLI's
 * `prune --dry-run` finds it on a PostgreSQL root, as `verify` finds CHECK_SESSION.
 */
export const HELD_SESSIONS = Symbol.for('session-persistence-jsonl/postgres:heldSessions')

/**
 * The condition that the pg_locks row `l` is the advisory lock granted on the bigint `k` (a
 * session's key, hashed as lock-connection.ts takes it) in this database, to any connection:
 * read, so nothing is taken. A bigint advisory key shows as its high 32 bits in classid, its
 * low 32 bits in objid, objsubid 1.
 */
export const ADVISORY_LOCK_ON = (l: string, k: string) => `
  ${l}.locktype = 'advisory' AND ${l}.granted AND ${l}.objsubid = 1
  AND ${l}.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ${l}.classid = ((${k} >> 32) & 4294967295)::oid AND ${l}.objid = (${k} & 4294967295)::oid`

// Which of the keys $1 (lock-connection.ts sessionKey) some connection holds the lock of.
const HELD = `
  SELECT u.key FROM unnest($1::text[]) AS u(key), LATERAL (SELECT hashtextextended(u.key, 0) AS k) h
   WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE ${ADVISORY_LOCK_ON('l', 'h.k')})`

/**
 * The ids among `ids` whose session's writer lock some connection holds now (a live writer: a
 * dead one's lock went with its connection), found without taking any lock. What a delete would
 * meet a moment later may differ (a writer that just started or stopped).
 */
export async function heldSessionIds(db: Db, schema: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const byKey = new Map(ids.map((id) => [sessionKey(schema, id), id]))
  const { rows } = await db.query<{ key: string }>(HELD, [[...byKey.keys()]])
  return new Set(rows.map((r) => byKey.get(r.key)!))
}
