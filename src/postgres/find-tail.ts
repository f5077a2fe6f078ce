import { TailStart } from '../session/tail-start.js'
import type { SessionEvent } from '../session/schema.js'
import type { Db } from './db.js'
import { EVENT_KINDS, FIRST_HISTORY_KIND } from './event-kinds.js'
import { parseEventLine } from './read-session.js'

// The last turn/start, turn/end and request/header below the length: three probes of the
// partial index events_markers (session_id, kind, seq) WHERE kind <> 0, each read backwards
// from the end and stopped at its first row. The kinds are literals, so the planner can prove
// the index's predicate from them. (Ordered by the column e.seq, not by the float8 output of the
// same name, which no index holds.)
const LAST_MARKERS = (s: string) => {
  const last = (kind: number) =>
    `(SELECT e.seq::float8 FROM "${s}".events e WHERE e.session_id = $1 AND e.kind = ${kind} AND e.seq < $2::bigint ORDER BY e.seq DESC LIMIT 1)`
  return `SELECT ${last(EVENT_KINDS['turn/start'])} AS turn_start, ${last(EVENT_KINDS['turn/end'])} AS turn_end,
                 ${last(EVENT_KINDS['request/header'])} AS header`
}

// Compactions and rewinds, newest first, a page at a time: the partial index events_history
// (session_id, seq) WHERE kind >= 4 read backwards from `before`.
const HISTORY_PAGE = (s: string) => `
  SELECT e.seq::float8 AS seq, e.line FROM "${s}".events e
   WHERE e.session_id = $1 AND e.kind >= ${FIRST_HISTORY_KIND} AND e.seq < $2::bigint
   ORDER BY e.seq DESC LIMIT $3`

/**
 * History markers read per round trip: a first page of 8 (most logs find their compaction in
 * force in it), each next one four times larger, up to 512.
 */
const FIRST_PAGE = 8
const LAST_PAGE = 512

/**
 * Where a load from the last compaction of `id` starts (§15.1), or undefined when no compaction
 * is in force (then the load is a full one). Reads no line but the compactions and rewinds from
 * the end back to the compaction in force: the last turn marker and the last `request/header`
 * are found by their kind alone. The markers are fed to the shared `TailStart` newest first,
 * exactly as a backward scan of the whole log would feed it. Run under the session's lock (or
 * in one snapshot): the rows below `length` do not change meanwhile.
 */
export async function findTailStart(db: Db, schema: string, id: string, length: number, path: string): Promise<number | undefined> {
  if (length === 0) return undefined
  return db.with(async (client) => {
    const { rows } = await client.query<{ turn_start: number | null; turn_end: number | null; header: number | null }>(
      LAST_MARKERS(schema),
      [id, length],
    )
    const found = rows[0]
    // Only their type and seq matter to TailStart: no line is read for them.
    const stubs: SessionEvent[] = []
    const stub = (seq: number | null | undefined, type: string) => {
      if (seq !== null && seq !== undefined) stubs.push({ seq, type, time: 0 })
    }
    stub(found?.turn_start, 'turn/start')
    stub(found?.turn_end, 'turn/end')
    stub(found?.header, 'request/header')
    stubs.sort((a, b) => b.seq - a.seq)
    const finder = new TailStart()
    const feedStubsAbove = (seq: number) => {
      while (stubs.length > 0 && stubs[0]!.seq > seq) finder.feed(stubs.shift()!)
    }
    for (let before = length, size = FIRST_PAGE; finder.compactionSeq === undefined; size = Math.min(LAST_PAGE, size * 4)) {
      const page = await client.query<{ seq: number; line: string }>(HISTORY_PAGE(schema), [id, before, size])
      for (const row of page.rows) {
        feedStubsAbove(row.seq)
        finder.feed(parseEventLine(row.line, row.seq, path, id))
        if (finder.compactionSeq !== undefined) break
      }
      if (page.rows.length < size) break
      before = page.rows[page.rows.length - 1]!.seq
    }
    feedStubsAbove(-1)
    return finder.firstSeq
  })
}
