import { asObject } from './as-object.js'
import type { SessionEvent } from './schema.js'

/** The event types that decide where a load from the last compaction starts (§15.1). */
export const TAIL_MARKER_TYPES = ['turn/start', 'turn/end', 'request/header', 'history/compact', 'history/rewind'] as const

/** The `[to, seq)` range a valid `history/rewind` drops, or undefined. */
function rewindRange(event: SessionEvent): [number, number] | undefined {
  const to = asObject(event.data)?.to
  return typeof to === 'number' && Number.isSafeInteger(to) && to >= 0 && to < event.seq ? [to, event.seq] : undefined
}

/** `firstKeptSeq` of a valid `history/compact` (at most its own seq), or undefined. */
export function compactionKeep(event: SessionEvent): number | undefined {
  if (event.type !== 'history/compact') return undefined
  const d = asObject(event.data)
  const k = d?.firstKeptSeq
  const summary = d?.summary
  if (typeof summary !== 'string' && !Array.isArray(summary)) return undefined
  return typeof k === 'number' && Number.isSafeInteger(k) && k >= 0 && k <= event.seq ? k : undefined
}

/**
 * Finds where a load from the last compaction starts (§15.1), fed the log's events newest first
 * (only the marker types matter; others may be skipped). `firstSeq` is the earliest of the
 * compaction in force's `firstKeptSeq`, the last `request/header` and an open turn's
 * `turn/start`; undefined while no compaction in force has been seen (then the load is a full
 * one). `done` says that older events can change nothing.
 */
export class TailStart {
  readonly #rewinds: [number, number][] = []
  #turnKnown = false
  #openTurnStart: number | undefined
  #header: number | undefined
  #keep: number | undefined
  /** The seq of the compaction in force, once found. */
  compactionSeq: number | undefined

  /** Feeds the next older event. */
  feed(event: SessionEvent): void {
    switch (event.type) {
      case 'turn/end':
        this.#turnKnown = true
        break
      case 'turn/start':
        if (!this.#turnKnown) {
          this.#turnKnown = true
          this.#openTurnStart = event.seq
        }
        break
      case 'request/header':
        this.#header ??= event.seq
        break
      case 'history/rewind': {
        const r = this.#keep === undefined ? rewindRange(event) : undefined
        if (r) this.#rewinds.push(r)
        break
      }
      case 'history/compact': {
        if (this.#keep !== undefined) break
        const k = compactionKeep(event)
        // A later rewind whose range holds this compaction's seq undoes it.
        if (k !== undefined && !this.#rewinds.some(([to, at]) => to <= event.seq && event.seq < at)) {
          this.#keep = k
          this.compactionSeq = event.seq
        }
        break
      }
    }
  }

  /** True once the state of the last turn is known (older turn markers change nothing). */
  get turnKnown(): boolean {
    return this.#turnKnown
  }

  /** True once the last request header is known (older ones change nothing). */
  get headerKnown(): boolean {
    return this.#header !== undefined
  }

  /** True once the compaction in force is known (older compactions and rewinds change nothing). */
  get compactionKnown(): boolean {
    return this.#keep !== undefined
  }

  /** True once nothing older can move `firstSeq`: the compaction, the header and the turn are all known. */
  get done(): boolean {
    return this.#keep !== undefined && this.#header !== undefined && this.#turnKnown
  }

  /** Where the tail starts, or undefined for a full load (no compaction in force). */
  get firstSeq(): number | undefined {
    if (this.#keep === undefined) return undefined
    return Math.min(this.#keep, this.#header ?? Number.POSITIVE_INFINITY, this.#openTurnStart ?? Number.POSITIVE_INFINITY)
  }
}

/** `firstSeq` of a load from the last compaction over events held in memory (0 when none is in force). */
export function tailStartOf(events: readonly SessionEvent[]): number {
  return tailStartWithin(events) ?? events[0]?.seq ?? 0
}

/**
 * `firstSeq` as the events of a tail decide it, fed newest first until they decide it; where
 * they do not (no turn marker among them, no request header), what is unknown counts as absent,
 * as it does for a search that reached the log's start. Undefined with no compaction in force
 * among them. What a load from a tail checks the backward search's decision against: the
 * compaction and the header it used lie in the tail, and an open turn's start would too.
 */
export function tailStartWithin(events: readonly SessionEvent[]): number | undefined {
  const finder = new TailStart()
  for (let i = events.length - 1; i >= 0 && !finder.done; i--) finder.feed(events[i]!)
  return finder.firstSeq
}
