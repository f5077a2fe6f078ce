import type { LoadedSession, RepairReport, SessionStore } from '../persistence.js'
import { computeClosers, findOpenTurn } from '../session/closers.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { type HistoryMarks, HistoryScan } from './history-marks.js'

/**
 * A log at most this big is shown as `inspect` reads it (all of it in memory, about four times
 * its size), so that its view has the exact repair marks: a torn tail's bytes and reason.
 * Anything bigger is read in pages through `read` and its memory stays that of a page.
 */
export const INSPECT_MAX_BYTES = 8 * 1024 * 1024

/** About this many bytes of log per page of `read`, and never more than `PAGE_EVENTS` events. */
const PAGE_BYTES = 4 * 1024 * 1024
export const PAGE_EVENTS = 1_000

/** Which events a view shows: all of them, the last n, or `fromSeq <= seq < toSeq`. */
export type ViewRange = { last: number } | { fromSeq: number; toSeq?: number }

/**
 * A session, or a range of it, as `show` and `export` view it: its events in pages (the stored
 * ones, then for a whole session the closers a repair would write), which can be iterated
 * again after the first pass that found `marks`, and what a repair of it would do.
 */
export interface SessionView {
  meta: SessionMeta
  /** The seq of the first event shown (0 for a whole session). */
  firstSeq: number
  /** Events the view shows: those of the range and, for a whole session, the closers. */
  count: number
  /** The number of valid events stored (a torn tail not counted, no closers). */
  length: number
  /** True for a view of the whole session (no range given). */
  whole: boolean
  /** `inspect`'s report, for a whole log small enough to inspect. */
  repair: RepairReport | undefined
  /** The closers a repair would write, or wrote: from `repair`, or found while paging a whole session. */
  closers: readonly SessionEvent[]
  /** False when the view was read in pages: a torn tail is then not looked for. */
  tornTailChecked: boolean
  marks: HistoryMarks
  pages(): AsyncIterable<readonly SessionEvent[]>
  /** `inspect`'s result, for a whole log small enough to inspect. */
  inspected: LoadedSession | undefined
}

/**
 * Opens a view of `id`: a whole log of at most `INSPECT_MAX_BYTES` (by its listing) through
 * `inspect`, anything else in pages through `read`, with a first pass over the pages for the
 * marks and the closers. A session written while it is shown is shown as it was when opened.
 */
export async function openSessionView(store: SessionStore, id: string, options: { sizeBytes: number | undefined; range?: ViewRange | undefined }): Promise<SessionView> {
  const { sizeBytes, range } = options
  if (range === undefined && (sizeBytes === undefined || sizeBytes <= INSPECT_MAX_BYTES)) return inspectedView(await store.inspect(id))
  // `last: 0` reads no event, but judges what follows the last valid line as a load does
  // (damage there rejects, as `show` of a whole log would).
  const head = await store.read(id, { last: 0 })
  const { meta } = head
  let length = head.length
  const boundsOf = (n: number) => {
    const from = range === undefined ? 0 : 'last' in range ? Math.max(0, n - range.last) : Math.min(range.fromSeq, n)
    const to = range !== undefined && 'fromSeq' in range && range.toSeq !== undefined ? Math.max(from, Math.min(range.toSeq, n)) : n
    return { from, to }
  }
  let { from, to } = boundsOf(length)
  const pageEvents = Math.max(1, Math.min(PAGE_EVENTS, Math.floor(PAGE_BYTES / Math.max(1, (sizeBytes ?? 0) / Math.max(1, length)))))
  async function* stored(): AsyncGenerator<readonly SessionEvent[]> {
    for (let seq = from; seq < to; seq += pageEvents) {
      const page = await store.read(id, { fromSeq: seq, toSeq: Math.min(to, seq + pageEvents) })
      if (page.events.length > 0) yield page.events
    }
  }
  let scan = new HistoryScan()
  let openTurn = new OpenTurnTracker()
  // A page that counts fewer valid events than the first look (a defect it did not see: zeroed
  // blocks before valid lines, 6.3) bounds the view again by that length, and the pass restarts.
  for (let attempt = 0; ; attempt++) {
    let shorter: number | undefined
    for (let seq = from; seq < to && shorter === undefined; seq += pageEvents) {
      const page = await store.read(id, { fromSeq: seq, toSeq: Math.min(to, seq + pageEvents) })
      // Bounded twice at most: a log repaired over and over while shown is shown as the third pass reads it.
      if (page.length < length && attempt < 2) shorter = page.length
      else {
        for (const e of page.events) scan.feed(e)
        if (range === undefined) openTurn.feed(page.events)
      }
    }
    if (shorter === undefined) break
    length = shorter
    ;({ from, to } = boundsOf(length))
    scan = new HistoryScan()
    openTurn = new OpenTurnTracker()
  }
  const closers = openTurn.closers(length, meta.createdAt)
  for (const c of closers) scan.feed(c)
  return {
    meta,
    firstSeq: from,
    count: to - from + closers.length,
    length,
    whole: range === undefined,
    repair: undefined,
    closers,
    tornTailChecked: false,
    marks: scan.finish(to >= length),
    inspected: undefined,
    async *pages() {
      yield* stored()
      if (closers.length > 0) yield closers
    },
  }
}

function inspectedView(session: LoadedSession): SessionView {
  const scan = new HistoryScan()
  for (const e of session.events) scan.feed(e)
  const closers = session.repair?.closers ?? []
  return {
    meta: session.meta,
    firstSeq: 0,
    count: session.events.length,
    whole: true,
    length: session.events.length - closers.length,
    repair: session.repair,
    closers,
    tornTailChecked: true,
    marks: scan.finish(true),
    inspected: session,
    async *pages() {
      yield session.events
    },
  }
}

/**
 * The closers of an open final turn (§6.1), found page by page: after each page only the open
 * turn's state is kept, as a few stand-in events (its start, its open step, one `tool/call` per
 * call still waiting), so memory follows the calls waiting, not the length of the turn. The
 * closers themselves come from the same `computeClosers` a repair runs.
 */
export class OpenTurnTracker {
  #carry: SessionEvent[] = []
  #last: SessionEvent | undefined

  feed(page: readonly SessionEvent[]): void {
    if (page.length === 0) return
    const open = findOpenTurn([...this.#carry, ...page])
    this.#last = page.at(-1)
    if (!open) {
      this.#carry = []
      return
    }
    const at = { seq: 0, time: 0 }
    this.#carry = [
      { ...at, type: 'turn/start', data: { turn: open.turn } },
      ...(open.step ? [{ ...at, type: 'step/start', data: { turn: open.step.turn, step: open.step.step } }] : []),
      ...open.pending.map((p) => ({ ...at, type: 'tool/call', data: { callId: p.callId, turn: p.turn, step: p.step } })),
    ]
  }

  /** What a repair would write after `length` stored events (none when no turn is open). */
  closers(length: number, createdAt: number): SessionEvent[] {
    if (this.#carry.length === 0) return []
    // The last stored event gives the closers their time; its type is one repair ignores.
    const last = { seq: 0, time: this.#last!.time, type: 'cli/last-stored' }
    return computeClosers([...this.#carry, last], createdAt).map((c, i) => ({ ...c, seq: length + i }))
  }
}
