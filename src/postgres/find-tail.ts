import { TailStart } from '../session/tail-start.js'
import type { FormatVersion } from '../session/line-codec.js'
import type { SessionEvent } from '../session/schema.js'
import type { Db } from './db.js'
import { EVENT_KINDS, FIRST_HISTORY_KIND } from './event-kinds.js'
import { PARTED_BYTES } from './line-parts.js'
import { LINE_OR_SIZE, parseEventLine, partedSize, readPartedEventHeld } from './read-session.js'

/**
 * History markers read per round trip: a first page of 8 (most logs find their compaction in
 * force in it; it comes back with the session's claim), each next one four times larger, up to 512.
 */
const FIRST_PAGE = 8
const LAST_PAGE = 512

// Compactions and rewinds, newest first, below `before`: the partial index events_history
// (session_id, seq) WHERE kind >= 4 read backwards, each as its seq, a space and its line (one
// array, one scan), or for a line of `parted` bytes or more its size, the line then read in parts
// (§15.5: a compaction's summary may be huge, and a text[] of whole lines holds each quoted and
// escaped, then parsed). (Ordered by the column e.seq, not by a float8 output of the same name,
// which no index holds.)
const history = (s: string, session: string, before: string, limit: string, parted: string) =>
  `ARRAY(SELECT e.seq::text || ' ' || ${LINE_OR_SIZE(parted, 'e.line')} FROM "${s}".events e
          WHERE e.session_id = ${session} AND e.kind >= ${FIRST_HISTORY_KIND} AND e.seq < ${before}
          ORDER BY e.seq DESC LIMIT ${limit})`

/**
 * What a tail load needs besides the claim, as more columns of the claim's `RETURNING` (no
 * round trip of its own; `s` is the claimed row): the last turn/start, turn/end and
 * request/header below the length, three backward probes of the partial index events_markers
 * (session_id, kind, seq) WHERE kind <> 0 that each stop at their first row (the kinds are
 * literals, so the planner can prove the index's predicate), and the first page of compactions
 * and rewinds.
 */
export function tailProbes(s: string): string {
  const last = (kind: number) =>
    `(SELECT e.seq::float8 FROM "${s}".events e WHERE e.session_id = s.session_id AND e.kind = ${kind} AND e.seq < s.length ORDER BY e.seq DESC LIMIT 1)`
  return `${last(EVENT_KINDS['turn/start'])} AS turn_start, ${last(EVENT_KINDS['turn/end'])} AS turn_end,
          ${last(EVENT_KINDS['request/header'])} AS header,
          ${history(s, 's.session_id', 's.length', String(FIRST_PAGE), String(PARTED_BYTES))} AS history`
}

/** The columns `tailProbes` adds, as the claim returns them. */
export interface TailProbes {
  turn_start: number | null
  turn_end: number | null
  header: number | null
  /** Each compaction or rewind as `<seq> <line>` (`<seq> <size>` for a line of PARTED_BYTES or more), newest first. */
  history: string[]
}

const HISTORY_PAGE = (s: string) => `SELECT ${history(s, '$1', '$2::bigint', '$3', '$4')} AS history`

/**
 * Where a load from the last compaction of `id` starts (§15.1), or undefined when no compaction
 * is in force (then the load is a full one), from the claim's probes and, when the compaction in
 * force is not in their first page, further pages of compactions and rewinds. No line is read
 * but those: the last turn marker and the last `request/header` are known by their kind alone.
 * Everything is fed to the shared `TailStart` newest first, exactly as a backward scan of the
 * whole log would feed it; each compaction and rewind read is checked as a load checks a line of
 * the session's `version` (its checksum in version 1). Run under the session's lock: the rows below the length stay as they are.
 * `huge`: the events of the lines of PARTED_BYTES or more it read at `firstSeq` or later (the
 * compaction in force is one of the tail's own events; all of them when it is undefined), for the
 * load to take instead of reading them again (§15.5: a huge line read twice, the first still garbage, cost 5× its size).
 */
export async function findTailStart(
  db: Db,
  schema: string,
  id: string,
  probes: TailProbes,
  path: string,
  version: FormatVersion,
): Promise<{ firstSeq: number | undefined; huge: Map<number, SessionEvent> }> {
  // Only their type and seq matter to TailStart.
  const stubs: SessionEvent[] = []
  const stub = (seq: number | null, type: string) => {
    if (seq !== null) stubs.push({ seq, type, time: 0 })
  }
  stub(probes.turn_start, 'turn/start')
  stub(probes.turn_end, 'turn/end')
  stub(probes.header, 'request/header')
  stubs.sort((a, b) => b.seq - a.seq)
  const finder = new TailStart()
  const feedStubsAbove = (seq: number) => {
    while (stubs.length > 0 && stubs[0]!.seq > seq) finder.feed(stubs.shift()!)
  }
  const huge = new Map<number, SessionEvent>()
  let page = probes.history
  for (let size = FIRST_PAGE; ; ) {
    let seq = 0
    for (const entry of page) {
      const space = entry.indexOf(' ')
      seq = Number(entry.slice(0, space))
      feedStubsAbove(seq)
      const line = entry.slice(space + 1)
      const size = partedSize(line)
      if (size === undefined) finder.feed(parseEventLine(line, seq, path, id, version))
      else {
        const { event } = await db.with((client) => readPartedEventHeld(client, { schema, id, path, version }, seq, size, false))
        huge.set(seq, event)
        finder.feed(event)
      }
      if (finder.compactionSeq !== undefined) break
    }
    if (finder.compactionSeq !== undefined || page.length < size) break
    size = Math.min(LAST_PAGE, size * 4)
    const { rows } = await db.query<{ history: string[] }>(HISTORY_PAGE(schema), [id, seq, size, PARTED_BYTES])
    page = rows[0]!.history
  }
  feedStubsAbove(-1)
  const { firstSeq } = finder
  // Without a compaction in force the load is a full one: it takes them all.
  for (const seq of huge.keys()) if (firstSeq !== undefined && seq < firstSeq) huge.delete(seq)
  return { firstSeq, huge }
}
