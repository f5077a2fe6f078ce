import type { RepairReport } from '../persistence.js'
import { OpenTurnTracker } from '../session/closers.js'
import type { SessionHeader } from '../session/schema.js'
import type { Db } from './db.js'
import { notFound, parseStoredHeader, readEvents, readHead, readSnapshot } from './read-session.js'

/**
 * The hook by which the CLI's `verify` reaches a PostgreSQL store's bounded check: a method of
 * the store under this registered symbol, absent from `SessionPersistence` (not public API). A
 * registered symbol, so that the CLI can look for it without importing this backend (or `pg`).
 */
export const CHECK_SESSION = Symbol.for('session-persistence-jsonl/postgres:checkSession')

/** What `inspect` of a stored session would say of it, without its events (`verify`, §15.5). */
export interface SessionCheck {
  header: SessionHeader
  /** Valid events stored (closers not counted): `inspect`'s events less its closers. */
  events: number
  /** The repair a load would make (`inspect`'s `repair` less `persisted`), undefined when there is none. */
  repair: Omit<RepairReport, 'persisted'> | undefined
}

/**
 * Checks the stored session `id` as `inspect` reads it, in the same read-only snapshot and by the
 * same query: its header parsed as `inspect` parses it, each line checked as `inspect` checks it
 * (`parseEventLine`: the checksum of a version-1 line, JSON, envelope, seq), rows missing below
 * the stored length refused, and the closers `computeClosers` would give of all its events
 * (`OpenTurnTracker.closers`); the same errors (`E_NOT_FOUND`, `E_CORRUPT` with its line,
 * `E_FORMAT_UNSUPPORTED`, …, unwrapped: the caller wraps them as `inspect` does). Each row is
 * checked as it arrives (node-postgres hands rows to a 'row' listener and, with one, keeps none)
 * and dropped. What is held is one network chunk, one line and the open turn's call ids: memory
 * does not grow with the session's size.
 */
export function checkSession(db: Db, schema: string, id: string, path: string): Promise<SessionCheck> {
  return readSnapshot(db, async (client) => {
    const head = await readHead(client, schema, id)
    if (!head) throw notFound(id, path)
    const header = parseStoredHeader(head.headerLine, id, path)
    const turn = new OpenTurnTracker() // holds the open turn's call ids, never an event
    // inspect's read (readEvents: the same query, checks and missing-row error), no event kept
    const { count } = await readEvents(client, schema, id, path, 0, head.length, header.version, { onEvent: (event) => turn.add(event) })
    const closers = turn.closers(header.createdAt) // what computeClosers gives of them all
    const repair = closers.length > 0 ? { droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers } : undefined
    return { header, events: count, repair }
  })
}
