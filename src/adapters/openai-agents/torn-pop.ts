import { asObject } from '../../session/as-object.js'
import { computeClosers } from '../../session/closers.js'
import { LAST_TURN_FIELD } from '../../session/last-turn.js'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import { FIRST_ITEM_FIELD } from './compaction.js'
import { type CompactionInForce, decodeSession, type PlacedItem } from './decode-events.js'
import { type EventDraft, ITEM_FIELD } from './encode-items.js'
import { placeAgain } from './place-again.js'

/**
 * Extra field of the `history/rewind` that `popItem` appends with more events after it in the
 * same append (the items the rewind also took out, placed again; a compaction it undid, recorded
 * again): `{follows, turn, of?}`. `follows` is how many events follow it in that append, `turn`
 * the session's last turn number before it (the items written again go in turn `turn + 1`), `of`
 * (on the rewind that completes a torn pop, `completeTornPop`) the seq of the pop's own rewind.
 * One line, so it is durable whole or not at all: it says what the append was to hold.
 */
export const POP_FIELD = 'openaiAgentsPop'
/** Extra field of each event that follows a POP_FIELD rewind in its append: that rewind's seq. */
export const POP_OF_FIELD = 'openaiAgentsPopOf'

interface PopMark {
  follows: number
  turn: number
  of?: number
}

/** The types of the closers a load's repair appends (§6.1). */
const CLOSER_TYPES: ReadonlySet<string> = new Set(['tool/result', 'step/end', 'turn/end'])

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : undefined)

function popMark(e: SessionEvent): PopMark | undefined {
  if (e.type !== 'history/rewind') return undefined
  const m = asObject(e[POP_FIELD])
  const follows = count(m?.follows)
  const turn = count(m?.turn)
  if (follows === undefined || turn === undefined) return undefined
  const of = count(m?.of)
  return of === undefined ? { follows, turn } : { follows, turn, of }
}

/** A `history/compact` draft recording the last turn number (LAST_TURN_FIELD) and, where the items start later than the view, FIRST_ITEM_FIELD. Pure. */
export function compactionDraft(summary: JsonValue, firstKeptSeq: number, itemsFrom: number | undefined, lastTurn: number): EventDraft {
  const draft: EventDraft = { type: 'history/compact', data: { summary, firstKeptSeq }, [LAST_TURN_FIELD]: lastTurn }
  if (itemsFrom !== undefined && itemsFrom !== firstKeptSeq) draft[FIRST_ITEM_FIELD] = itemsFrom
  return draft
}

/**
 * What follows the rewind of a pop of `last` (to `last.from`) in its append, the rewind being
 * written at seq `at`, the session's last turn `lastTurn`: the items the rewind also takes out,
 * placed again (`placeAgain`), then the compaction it undoes, recorded again; each marked with
 * POP_OF_FIELD `at`. Pure: the same session gives the same events, which `completeTornPop` relies on.
 */
export function popFollowers(
  placed: readonly PlacedItem[],
  compaction: CompactionInForce | undefined,
  last: PlacedItem,
  at: number,
  lastTurn: number,
): { drafts: EventDraft[]; turn?: number } {
  const to = last.from
  const again = placed.filter((p) => !p.compaction && p !== last && p.seq >= to)
  const restored = placeAgain(again, to, lastTurn + 1)
  const drafts = [...restored.drafts]
  if (compaction && to < compaction.seq) {
    // The items start where they did, unless every one left was placed again: then at the first of those.
    const stays = placed.some((p) => !p.compaction && p.seq < to)
    const first = drafts.findIndex((d) => d[ITEM_FIELD] !== undefined)
    const itemsFrom = stays || first === -1 ? compaction.itemsFrom : at + 1 + first
    drafts.push(compactionDraft(compaction.summary, compaction.keep, itemsFrom, restored.turn ?? lastTurn))
  }
  for (const d of drafts) d[POP_OF_FIELD] = at
  return restored.turn === undefined ? { drafts } : { drafts, turn: restored.turn }
}

/** JSON with sorted keys: an event as read back compares equal to the draft it was written from. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  )
}
const sameEvent = (e: SessionEvent, d: EventDraft) => canonical({ ...e, seq: 0, time: 0 }) === canonical({ ...d, seq: 0, time: 0 })

/**
 * When the log (`events`, its first seq `firstSeq`, the whole log or a tail holding the last
 * compaction) ends in a pop whose append a crash tore (on JSONL an append is not atomic: its
 * POP_FIELD rewind durable, some of the events after it not, and the load kept the lines before
 * the first damaged one, §6), the events that complete it, to append at seq `at` (the log's end).
 * The pop never returned: completing it is as
 * if its append had landed, so the items shown are again those before it but the popped one.
 * - Only the pop's own events after its rewind (a prefix of them): the rest of them, the same
 *   events (recomputed from the log before the rewind: `popFollowers` is pure).
 * - That prefix ending in the turn it opened for items written again, closed by the load's repair
 *   (§6.1 closers, recognised exactly): a rewind to just after the pop's rewind (its prefix and the
 *   closers out of every view; they held nothing acknowledged) and all its events again, in a new
 *   turn; the new rewind is marked as the pop's (POP_FIELD `of`), so a crash tearing this append
 *   too is completed the same way.
 * Undefined when there is nothing to complete, and when the log does not end as a torn pop leaves
 * it (another writer appended after it; events that are not those this code would write): it is
 * left as it is.
 */
export function completeTornPop(
  events: readonly SessionEvent[],
  firstSeq: number,
  at: number,
): EventDraft[] | undefined {
  // Back from the end: the closers the load's repair wrote (unmarked), then the pop's own events.
  let i = events.length - 1
  while (i >= 0 && CLOSER_TYPES.has(events[i]!.type) && events[i]![POP_OF_FIELD] === undefined) i--
  const closers = events.length - 1 - i
  let k = 0
  while (i >= 0 && events[i]![POP_OF_FIELD] !== undefined) {
    k++
    i--
  }
  const rewind = events[i]
  const mark = rewind && popMark(rewind)
  if (!rewind || !mark || k >= mark.follows) return undefined
  const written = events.slice(i + 1, i + 1 + k)
  if (written.some((e) => e[POP_OF_FIELD] !== rewind.seq)) return undefined
  const of = mark.of ?? rewind.seq
  if (of < firstSeq || of > rewind.seq) return undefined
  const { placed, compaction } = decodeSession(events.slice(0, of - firstSeq))
  const last = placed.at(-1)
  if (!last || last.compaction) return undefined
  const mine = popFollowers(placed, compaction, last, rewind.seq, mark.turn).drafts
  if (mine.length !== mark.follows || written.some((e, j) => !sameEvent(e, mine[j]!))) return undefined
  if (closers === 0) return mine.slice(k)
  // The closers must be the repair's for the turn the pop's own events opened.
  const kept = events.slice(0, events.length - closers)
  const expected = computeClosers(kept, 0)
  const opened = written.some((e) => e.type === 'turn/start')
  if (!opened || expected.length !== closers || expected.some((c, j) => canonical(c.data) !== canonical(events[kept.length + j]!.data) || c.type !== events[kept.length + j]!.type)) {
    return undefined
  }
  // The last turn is the one the torn append opened (its number follows the pop's `turn`).
  const lastTurn = mark.turn + 1
  const again = popFollowers(placed, compaction, last, at, lastTurn).drafts
  return [{ type: 'history/rewind', data: { to: rewind.seq + 1 }, [POP_FIELD]: { follows: again.length, turn: lastTurn, of } }, ...again]
}
