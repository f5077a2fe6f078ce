import { asObject } from '../session/as-object.js'
import { isRewoundBy, rewoundRanges } from '../session/history.js'
import type { SessionEvent } from '../session/schema.js'
import { compactionKeep } from '../session/tail-start.js'
import { type CompactionState, describeCompaction, describeRewind, MESSAGE_TYPES, toolCalls } from './render.js'

// What later events say about earlier ones: a rewind marks the messages before it, a compaction
// the messages before its firstKeptSeq, a missing result the call it never answered, an
// assistant message the `tool/call` recorded before it (so that call is shown there, not alone). A
// transcript printed page by page learns these in a first pass over the same events, whose
// state grows with the number of rewinds, compactions and unanswered calls, never with the log.

/** A compaction (§2.1) as the views show it. */
export interface Compaction {
  seq: number
  /** Its `firstKeptSeq`. */
  keep: number
}

/** What the first pass learnt, read by the renderers as they print each event. */
export interface HistoryMarks {
  /** Whether a `history/rewind` drops the message of the event at `seq` (§2.1). */
  rewound(seq: number): boolean
  /** The compaction in force (§7), if one is known. */
  readonly inForce: Compaction | undefined
  /** Where a valid compaction stands: in force, replaced by a later one, undone by a rewind, or unknown (a page that does not reach the end). */
  status(seq: number): CompactionState
  /** Whether the call `callId` of the assistant message (or lone `tool/call`) at `seq` is known never to get a result. */
  unanswered(seq: number, callId: string): boolean
  /**
   * Whether the `tool/call` at `seq` is a call of its own: no assistant message holds it (a
   * recorder writes the call before the step's message, and a process killed in the tool left
   * only the call), so the views show it as a call line of its own.
   */
  lone(seq: number): boolean
  /** The seqs at which a renderer must note how many messages came before (each rewind's `to`, each compaction's `firstKeptSeq`). */
  readonly countsWanted: ReadonlySet<number>
}

/** The first pass: fed every event of a view in seq order, then `finish`ed. */
export class HistoryScan {
  readonly #rewinds: SessionEvent[] = []
  readonly #compactions: Compaction[] = []
  /**
   * Calls still waiting for a result: callId → seq of the assistant message holding it, or of
   * the `tool/call` that recorded it when no message holds it (yet).
   */
  readonly #pending = new Map<string, { seq: number; lone: boolean }>()
  readonly #unanswered = new Set<string>()
  /** The seqs of `tool/call`s no assistant message holds (so far). */
  readonly #lone = new Set<number>()

  feed(e: SessionEvent): void {
    switch (e.type) {
      case 'history/rewind':
        this.#rewinds.push(e)
        break
      case 'history/compact': {
        const keep = compactionKeep(e)
        if (keep !== undefined) this.#compactions.push({ seq: e.seq, keep })
        break
      }
      case 'assistant/message':
        for (const call of toolCalls(asObject(e.data)?.content)) {
          const earlier = this.#pending.get(call.callId)
          // The call a `tool/call` recorded before its message (the AI SDK's order): the message holds it.
          if (earlier?.lone) this.#lone.delete(earlier.seq)
          // A call id used again before the first call got its result: the first never will.
          else if (earlier !== undefined) this.#unanswered.add(`${earlier.seq}:${call.callId}`)
          this.#pending.set(call.callId, { seq: e.seq, lone: false })
        }
        break
      case 'tool/call': {
        // A call still waiting (held by a message before it, or recorded already) is that call's
        // dispatch; any other is a call of its own until a message holds it (as toModelHistory
        // shows a `tool/call` no assistant message holds).
        const callId = asObject(e.data)?.callId
        if (typeof callId !== 'string' || this.#pending.has(callId)) break
        this.#pending.set(callId, { seq: e.seq, lone: true })
        this.#lone.add(e.seq)
        break
      }
      case 'tool/result': {
        const callId = asObject(e.data)?.callId
        if (typeof callId === 'string') this.#pending.delete(callId)
        break
      }
    }
  }

  /**
   * `complete` says the events fed reach the end of the log: only then are the calls still
   * waiting known to be unanswered, and the last compaction known to be in force.
   */
  finish(complete: boolean): HistoryMarks {
    if (complete) for (const [callId, { seq }] of this.#pending) this.#unanswered.add(`${seq}:${callId}`)
    const rewound = isRewoundBy(rewoundRanges(this.#rewinds))
    const standing = this.#compactions.filter((c) => !rewound(c.seq))
    const last = standing.at(-1)
    const inForce = complete ? last : undefined
    const countsWanted = new Set<number>()
    for (const c of this.#compactions) countsWanted.add(c.keep)
    for (const e of this.#rewinds) {
      const to = asObject(e.data)?.to
      if (typeof to === 'number' && Number.isSafeInteger(to) && to >= 0) countsWanted.add(to)
    }
    const unanswered = this.#unanswered
    const lone = this.#lone
    return {
      rewound,
      inForce,
      countsWanted,
      unanswered: (seq, callId) => unanswered.has(`${seq}:${callId}`),
      lone: (seq) => lone.has(seq),
      status: (seq) => {
        if (rewound(seq)) return { kind: 'rewound' }
        const later = standing.find((c) => c.seq > seq)
        if (later) return { kind: 'superseded', by: standing.at(-1)!.seq }
        return complete ? { kind: 'in-force' } : { kind: 'unknown' }
      },
    }
  }
}

/** The marks of a view with no first pass (every event already in memory): one scan of them. */
export function marksOf(events: readonly SessionEvent[], complete: boolean): HistoryMarks {
  const scan = new HistoryScan()
  for (const e of events) scan.feed(e)
  return scan.finish(complete)
}

/** How a renderer shows one event against the history (§7): a message rewound, or replaced by the compaction in force. */
export interface EventStanding {
  rewound: boolean
  compacted: boolean
}

/**
 * What both renderers count as they print (the Markdown export and the transcript): the messages
 * so far, all of them and those still in the model's history, and those counts at the seqs
 * `marks` asks for, so that a rewind says how many messages it took out and a compaction how many
 * it replaced. Bounded: one count per seq asked for.
 */
export class HistoryCounter {
  readonly #marks: HistoryMarks
  readonly #at = new Map<number, { all: number; shown: number }>()
  #messages = { all: 0, shown: 0 }
  /** The seq of the first event seen: a view that starts past 0 does not know what came before it. */
  #firstSeq: number | undefined

  constructor(marks: HistoryMarks) {
    this.#marks = marks
  }

  /** Counts `e` (before it is rendered): whether it is a message rewound, or one compacted. */
  see(e: SessionEvent): EventStanding {
    this.#firstSeq ??= e.seq
    if (this.#marks.countsWanted.has(e.seq)) this.#at.set(e.seq, { ...this.#messages })
    const isMessage = MESSAGE_TYPES.has(e.type)
    const rewound = isMessage && this.#marks.rewound(e.seq)
    const compaction = this.#marks.inForce
    const compacted = isMessage && !rewound && compaction !== undefined && e.seq < compaction.keep
    if (isMessage) this.#messages = { all: this.#messages.all + 1, shown: this.#messages.shown + (rewound ? 0 : 1) }
    return { rewound, compacted }
  }

  /** What a `history/rewind` says, with the messages it took out when its `to` was seen. */
  rewindText(e: SessionEvent): string {
    const to = asObject(e.data)?.to
    const before = typeof to === 'number' ? this.#at.get(to) : undefined
    return describeRewind(e, before === undefined ? undefined : this.#messages.all - before.all)
  }

  /** What a `history/compact` says, with the messages it replaced when its `firstKeptSeq` was seen, and where it stands. */
  compactionText(e: SessionEvent): string {
    // It replaced every message before `firstKeptSeq`, from the log's start: counted only by a
    // view that starts there (a page that starts later saw only some of them).
    const keep = asObject(e.data)?.firstKeptSeq
    const before = typeof keep === 'number' && this.#firstSeq === 0 ? this.#at.get(keep) : undefined
    return describeCompaction(e, before?.shown, this.#marks.status(e.seq))
  }
}
