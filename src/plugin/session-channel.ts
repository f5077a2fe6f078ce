import { isDeepStrictEqual } from 'node:util'
import PQueue from 'p-queue'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import type { SessionPersistenceError } from '../errors.js'
import { type BufferBudget, BufferShare } from './buffer-budget.js'

/** Stored events from `firstSeq` on: `events[i].seq === firstSeq + i`; the log holds `firstSeq + events.length`. */
export interface StoredSlice {
  readonly events: readonly SessionEvent[]
  readonly firstSeq: number
}

/**
 * The plugin's state for one live session: the events received from the host and not yet
 * durable, the cursor into the stored log, and the queue that serializes every operation.
 */
export class SessionChannel {
  readonly id: string
  readonly meta: SessionMeta
  readonly queue = new PQueue({ concurrency: 1 })
  readonly share: BufferShare
  /** The seq the host's seed starts at (0 unless it resumed from a tail): where the channel's cursor started. */
  readonly firstSeq: number
  /** Events received and not yet durable, in seq order: buffer[i].seq === cursor + i. */
  buffer: SessionEvent[]
  /** First seq not known to be stored (everything below it is durable). */
  cursor = 0
  /** Seq the next host event must carry. */
  expected: number
  /** Whether the persistence has the session open for appends. */
  opened = false
  /** Whether it was ever open: a later adoption is a re-adoption, and a mismatch is a divergence, not a collision. */
  everOpened = false
  /** The backend's writer state cannot be trusted: close the session before adopting it again. */
  reopen = false
  /** What an adoption compares the stored log with: `known[i]` has seq `knownFrom + i`. */
  known: readonly SessionEvent[] | undefined
  knownFrom = 0
  /** Collision, seq gap, refused event, divergence or buffer overflow: nothing more is accepted from the host. */
  halted: SessionPersistenceError | undefined
  /** The passing failure last reported, until a drain succeeds. */
  failure: SessionPersistenceError | undefined
  /** Set while a drain has been in flight too long without settling (the backend does not answer). */
  stall: SessionPersistenceError | undefined
  /** The last passing failure or stall, kept after recovery (what a drop is blamed on). */
  lastFailure: SessionPersistenceError | undefined
  flushTimer: NodeJS.Timeout | undefined
  /** A drain requested but not yet queued: later requests join it. */
  scheduledDrain: Promise<void> | undefined
  retryTimer: NodeJS.Timeout | undefined
  retryDelayMs = 0
  /** Set by session/disposed: the drain-then-close in progress (never rejects). */
  closing: Promise<void> | undefined
  /** After session/disposed: settles when its final drain has (`closedWith` then set), before its close. */
  drained: Promise<void> | undefined
  /** How the drain-then-close ended: the error that left events not durable, if any. */
  closedWith: SessionPersistenceError | undefined
  /** A previous channel of the same id that is still closing; opening waits for it. */
  after: Promise<void> | undefined
  #wake: (() => void) | undefined

  /** `seed` holds the session's events from `firstSeq` on (a tail, when the host resumed from the last compaction). */
  constructor(meta: SessionMeta, seed: readonly SessionEvent[], budget: BufferBudget, firstSeq = 0) {
    this.id = meta.id
    this.meta = meta
    this.share = new BufferShare(budget)
    this.firstSeq = firstSeq
    this.buffer = [...seed]
    this.cursor = firstSeq
    this.expected = firstSeq + seed.length
    this.known = seed
    this.knownFrom = firstSeq
  }

  /**
   * Whether the stored events agree with what this channel knows (a resumed session, not a new
   * one): the log holds at least the events before `knownFrom`, at most what is known after it,
   * and each stored event from `knownFrom` on equals the known one. `stored` holds the log from
   * its `firstSeq` on, which must be at or before `knownFrom` when the log reaches past it.
   */
  covers(stored: StoredSlice): boolean {
    const known = this.known ?? []
    const total = stored.firstSeq + stored.events.length
    if (total < this.knownFrom || total > this.knownFrom + known.length) return false
    if (total > this.knownFrom && stored.firstSeq > this.knownFrom) return false // not read far back enough to tell
    for (let seq = this.knownFrom; seq < total; seq++) {
      // Compare as JSON: the host's objects may carry `undefined` fields the log omits. One that
      // is no JSON (a BigInt, a cycle, a throwing getter) equals no stored event.
      let mine: unknown
      try {
        mine = JSON.parse(JSON.stringify(known[seq - this.knownFrom])) as unknown
      } catch {
        return false
      }
      if (!isDeepStrictEqual(stored.events[seq - stored.firstSeq], mine)) return false
    }
    return true
  }

  /** The session is open for appends and its log holds `storedCount` events. */
  openedAt(storedCount: number): void {
    this.opened = true
    this.everOpened = true
    const drop = Math.max(0, Math.min(this.buffer.length, storedCount - this.cursor))
    if (drop > 0) this.buffer.splice(0, drop)
    this.cursor = Math.max(this.cursor, storedCount)
    this.known = undefined
  }

  /** The first `count` buffered events are durable. */
  written(count: number): void {
    this.buffer.splice(0, count)
    this.cursor += count
  }

  /** Before a retry the backend's writer state is dropped and the stored log read again. */
  needsReadoption(): void {
    this.opened = false
    this.reopen = true
    this.known = this.buffer.slice()
    this.knownFrom = this.cursor
  }

  /** Drops every buffered event (they can never be written) and its share of the budget. */
  dropBuffered(): void {
    this.buffer = []
    this.share.release()
  }

  /** Waits `ms` for a retry; `clearTimers` (dispose) ends the wait at once. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.#wake = done
    })
  }

  clearFlushTimer(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer)
    this.flushTimer = undefined
  }

  clearTimers(): void {
    this.#wake?.()
    this.#wake = undefined
    this.clearFlushTimer()
    if (this.retryTimer) clearTimeout(this.retryTimer)
    this.retryTimer = undefined
  }
}
