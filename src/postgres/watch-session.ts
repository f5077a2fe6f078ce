import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../errors.js'
import type { FormatVersion } from '../session/line-codec.js'
import type { SessionEvent } from '../session/schema.js'
import type { WatchPoll, WatchSource } from '../session/watch-loop.js'
import type { ChangeFeed } from './change-feed.js'
import { backoff, type Db, isConnectionError } from './db.js'
import { PARTED_BYTES } from './line-parts.js'
import { LINE_OR_SIZE, parseEventLine, parseStoredHeader, partedSize, readPartedEventOrLine } from './read-session.js'

// The session's length and its next lines, in one statement (one snapshot): no row means no
// session. The lines come from the primary key, from `next` on, at most a page at a time: PAGE
// lines, and no line after PAGE_BYTES of them (the first always), so a page after a huge line
// ends there. A line of a megabyte or more comes as its size and is read in parts
// (read-session.ts, §15.5). The header line comes with the first row only (its format version
// says how to check the lines). The incarnation tells this session row from one that replaced it
// (schema version 4).
const POLL = (s: string) => `
  SELECT s.length::float8 AS length, s.incarnation::text AS incarnation, e.seq::float8 AS seq, e.line,
         CASE WHEN e.seq IS NOT DISTINCT FROM min(e.seq) OVER () THEN s.header_line END AS header_line
    FROM "${s}".sessions s
    LEFT JOIN LATERAL (
      SELECT seq, line FROM (
        SELECT seq, ${LINE_OR_SIZE('$4')} AS line, sum(octet_length(line)) OVER (ORDER BY seq) - octet_length(line) AS before
          FROM "${s}".events
         WHERE session_id = s.session_id AND seq >= $2::bigint AND seq < s.length
         ORDER BY seq LIMIT $3
      ) p WHERE p.before < $5
    ) e ON true
   WHERE s.session_id = $1
   ORDER BY e.seq`

/** Lines read per poll: a watcher from 0 of a long session reads it a page at a time, in bounded memory. */
const PAGE = 500
/** Bytes of lines read per poll, but the first line's. */
const PAGE_BYTES = 8 * 1024 * 1024

export interface WatchDeps {
  db: Db
  schema: string
  feed: ChangeFeed
  /** The safety poll: how long a watcher waits for a notification before it reads anyway. */
  pollMs: number
  /** How long a read whose connection failed is tried again before the watch rejects (the writers' `retryTimeoutMs`). */
  retryTimeoutMs: number
  path: string
  /** Resolves once the schema is ready (rejects after the store ended). */
  ready(): Promise<void>
  /**
   * Runs one read: the store's watchers share a few of its pool's connections (a quarter), so a
   * notification that wakes many watchers at once never takes the connections its writers need.
   */
  limit<T>(read: () => Promise<T>): Promise<T>
}

/**
 * What `watchLoop` needs to follow one session on PostgreSQL (§15.3): a poll reads the stored
 * lines from `next` (no lock: writers are never delayed), and a change is a notification of the
 * session on the store's shared listening connection, or the safety poll's timer.
 */
export function watchSource(id: string, deps: WatchDeps): WatchSource {
  let wake: (() => void) | undefined
  let unsubscribe: (() => void) | undefined
  let checkedHeader: { line: string; version: FormatVersion } | undefined // the header last checked, and its version
  // The session this watcher follows, from the first poll that found it: its row's incarnation
  // (null for a row inserted before schema version 4) and the longest length seen. A row of
  // another incarnation, or a shorter one, is a session deleted and created again under that
  // id, perhaps before this watcher looked: the watch ends there (§15.3), as it would had it
  // seen the delete, and never goes on into the new session's events.
  let followed: { incarnation: string | null; length: number } | undefined
  let ended = false
  // The loop's stop signal, from `changed` (armed before every poll): an abort ends a poll's retries.
  let stopped: AbortSignal | undefined
  async function pollOnce(next: number): Promise<WatchPoll> {
    if (ended) return { kind: 'missing' }
    await deps.ready()
    const { rows } = await deps.limit(() =>
      deps.db.query<{ length: number; incarnation: string | null; seq: number | null; line: string | null; header_line: string | null }>(
        POLL(deps.schema),
        [id, next, PAGE, PARTED_BYTES, PAGE_BYTES],
      ),
    )
    if (rows.length === 0) return { kind: 'missing' }
    const { incarnation, length } = rows[0]!
    if (followed && (incarnation !== followed.incarnation || length < followed.length)) {
      ended = true
      return { kind: 'missing' }
    }
    followed = { incarnation, length }
    const events: SessionEvent[] = []
    if (rows[0]!.seq === null) return { kind: 'events', events }
    // Its version says how to check the lines (§16), read once per session followed.
    const headerLine = rows[0]!.header_line!
    if (headerLine !== checkedHeader?.line) checkedHeader = { line: headerLine, version: parseStoredHeader(headerLine, id, deps.path).version }
    const { version } = checkedHeader
    for (const row of rows) {
      if (row.seq === null || row.line === null) continue
      // The rows run on from `next` as `read` needs them to (a row deleted by hand below the
      // stored length left the page starting later, which the loop passed over and polled for
      // again at once, for ever).
      if (row.seq !== next + events.length) {
        if (events.length > 0) break // those before the gap first; the next poll starts at it
        throw new SessionPersistenceCorruptionError(next + 2, -1, 'rows are missing below the stored length', { path: deps.path, sessionId: id })
      }
      const size = partedSize(row.line)
      let event: SessionEvent
      try {
        if (size === undefined) event = parseEventLine(row.line, row.seq, deps.path, id, version)
        else {
          const where = { schema: deps.schema, id, path: deps.path, version }
          const read = await deps.limit(() => deps.db.with((client) => readPartedEventOrLine(client, where, row.seq!, size, false)))
          // Gone since the page was read: the session was deleted or replaced, which the next poll sees.
          if (!read) break
          event = read.event
        }
      } catch (err) {
        // A damaged line: the events before it are yielded first, the next poll starts at it.
        if (events.length > 0 && isSessionPersistenceError(err, 'E_CORRUPT')) break
        throw err
      }
      events.push(event)
    }
    return { kind: 'events', events }
  }
  return {
    /**
     * A poll is a read, safe to repeat: one whose connection failed (a server restart, a
     * terminated backend) is tried again with the writers' backoff for `retryTimeoutMs`, as an
     * append rides out the same outage, and the watch goes on from where it was (§15.3: it ends
     * only on delete or abort). Past that, the connection error rejects the watch (E_IO). An
     * abort meanwhile ends the retries: the poll finds nothing and the loop sees the abort.
     */
    async poll(next: number): Promise<WatchPoll> {
      const deadline = Date.now() + deps.retryTimeoutMs
      for (let attempt = 0; ; attempt++) {
        try {
          return await pollOnce(next)
        } catch (err) {
          if (!failedToConnect(err) || Date.now() >= deadline) throw err
          await backoff(attempt, stopped)
          if (stopped?.aborted) return { kind: 'events', events: [] }
        }
      }
    },
    changed(stop: AbortSignal): Promise<void> {
      stopped = stop
      unsubscribe ??= deps.feed.subscribe(id, () => wake?.())
      return new Promise<void>((resolve) => {
        if (stop.aborted) return resolve()
        const done = () => {
          clearTimeout(timer)
          stop.removeEventListener('abort', done)
          if (wake === done) wake = undefined
          resolve()
        }
        const timer = setTimeout(done, deps.pollMs)
        stop.addEventListener('abort', done, { once: true })
        wake = done
      })
    },
    close(): void {
      wake?.()
      unsubscribe?.()
      unsubscribe = undefined
    },
  }
}

/**
 * A connection failure, also as the store's first preparation of its schema reports one (an
 * `E_IO` whose cause is the connection error): a watch that is a process's first call, started
 * while the server restarts, rides the outage out as a later one does.
 */
function failedToConnect(err: unknown): boolean {
  if (isConnectionError(err)) return true
  return isSessionPersistenceError(err) && err.code === 'E_IO' && isConnectionError((err as { cause?: unknown }).cause)
}
