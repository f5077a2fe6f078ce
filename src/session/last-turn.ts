import { asObject } from './as-object.js'
import type { SessionEvent } from './schema.js'
import { isSessionPersistenceError } from '../errors.js'
import type { SessionPersistence } from '../persistence.js'

/** Events read at a time when looking before a tail for the last turn number. */
const PAGE = 64

/**
 * Extra envelope field (§2: kept verbatim) of the `history/compact` the adapters write: the number
 * of the session's last turn when it was compacted. A tail load always holds the compaction in
 * force, so a resume knows where the numbers stand without reading before the tail.
 */
export const LAST_TURN_FIELD = 'lastTurn'

const turnNumber = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined)

/** The highest turn number `events` record (`turn/start`, `turn/end`, a compaction's `LAST_TURN_FIELD`), if any. */
export function highestTurn(events: readonly SessionEvent[]): number | undefined {
  let last: number | undefined
  for (const e of events) {
    let turn: number | undefined
    if (e.type === 'turn/start' || e.type === 'turn/end') turn = turnNumber(asObject(e.data)?.turn)
    else if (e.type === 'history/compact') turn = turnNumber(e[LAST_TURN_FIELD])
    if (turn !== undefined && (last === undefined || turn > last)) last = turn
  }
  return last
}

/**
 * The number of the session's last turn, so the next one continues it. A tail read from the last
 * compaction (`firstSeq > 0`) may hold no turn at all (a compaction that kept nothing): then the
 * number the compaction recorded (`LAST_TURN_FIELD`) tells it. A compaction another host wrote
 * records none: the events before the tail are read backwards, a page at a time, until one records
 * a turn. The tail load trusts what lies before it unread (§15.1), so damage there does not fail
 * the resume: a page that fails `E_CORRUPT` is read again event by event, the events that fail are
 * passed over, and the search goes on before them (the highest number still readable; with
 * nothing readable, 0).
 */
export async function lastTurnOf(persistence: SessionPersistence, id: string, events: readonly SessionEvent[], firstSeq: number): Promise<number> {
  const inTail = highestTurn(events)
  if (inTail !== undefined) return inTail
  for (let toSeq = firstSeq; toSeq > 0; ) {
    const fromSeq = Math.max(0, toSeq - PAGE)
    const found = highestTurn(await readPage(persistence, id, fromSeq, toSeq))
    if (found !== undefined) return found
    toSeq = fromSeq
  }
  return 0
}

/** The events `fromSeq <= seq < toSeq`; where that range holds damage, those of its events still readable. */
async function readPage(persistence: SessionPersistence, id: string, fromSeq: number, toSeq: number): Promise<readonly SessionEvent[]> {
  try {
    return (await persistence.read(id, { fromSeq, toSeq })).events
  } catch (error) {
    if (!isSessionPersistenceError(error, 'E_CORRUPT')) throw error
  }
  const readable: SessionEvent[] = []
  for (let seq = fromSeq; seq < toSeq; seq++) {
    try {
      readable.push(...(await persistence.read(id, { fromSeq: seq, toSeq: seq + 1 })).events)
    } catch (error) {
      if (!isSessionPersistenceError(error, 'E_CORRUPT')) throw error
    }
  }
  return readable
}
