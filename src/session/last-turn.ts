import { asObject } from './as-object.js'
import type { SessionEvent } from './schema.js'
import type { SessionPersistence } from '../persistence.js'

/** Events read at a time when looking before a tail for the last turn number. */
const PAGE = 64

/** The highest turn number `events` record (`turn/start` and `turn/end`), if any. */
function highestTurn(events: readonly SessionEvent[]): number | undefined {
  let last: number | undefined
  for (const e of events) {
    if (e.type !== 'turn/start' && e.type !== 'turn/end') continue
    const turn = asObject(e.data)?.turn
    if (typeof turn === 'number' && Number.isSafeInteger(turn) && (last === undefined || turn > last)) last = turn
  }
  return last
}

/**
 * The number of the session's last turn, so the next one continues it. A tail read from the last
 * compaction (`firstSeq > 0`) may hold no turn at all (a compaction that kept nothing): then the
 * events before it are read backwards, a page at a time, until one records a turn.
 */
export async function lastTurnOf(persistence: SessionPersistence, id: string, events: readonly SessionEvent[], firstSeq: number): Promise<number> {
  const inTail = highestTurn(events)
  if (inTail !== undefined) return inTail
  for (let toSeq = firstSeq; toSeq > 0; ) {
    const fromSeq = Math.max(0, toSeq - PAGE)
    const found = highestTurn((await persistence.read(id, { fromSeq, toSeq })).events)
    if (found !== undefined) return found
    toSeq = fromSeq
  }
  return 0
}
