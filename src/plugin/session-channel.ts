import { isDeepStrictEqual } from 'node:util'
import PQueue from 'p-queue'
import type { SessionEvent, SessionMeta } from '../core/schema.js'
import type { SessionPersistenceError } from '../errors.js'

/**
 * The plugin's state for one live session: the events received from the host and not yet
 * durable, the cursor into the stored log, and the queue that serializes every operation.
 */
export class SessionChannel {
  readonly id: string
  readonly meta: SessionMeta
  readonly queue = new PQueue({ concurrency: 1 })
  /** Events received and not yet durable, in seq order: buffer[i].seq === cursor + i. */
  buffer: SessionEvent[]
  /** First seq not known to be stored (everything below it is durable). */
  cursor = 0
  /** Seq the next host event must carry. */
  expected: number
  /** Whether the persistence has the session open for appends. */
  opened = false
  /** What an (re)adoption compares the stored log with: `known[i]` has seq `knownFrom + i`. */
  known: readonly SessionEvent[] | undefined
  knownFrom = 0
  /** Collision, seq gap or buffer overflow: nothing more is accepted from the host. */
  halted: SessionPersistenceError | undefined
  /** The last drain failure, until a drain succeeds. */
  failure: SessionPersistenceError | undefined
  /** Buffered bytes counted against maxBufferedBytes; events are sized only while drains fail. */
  sizedBytes = 0
  sizing = false
  flushTimer: NodeJS.Timeout | undefined
  /** A drain requested but not yet queued: later requests join it. */
  scheduledDrain: Promise<void> | undefined
  retryTimer: NodeJS.Timeout | undefined
  retryDelayMs = 0
  /** Set by session/disposed: the drain-then-close in progress. */
  closing: Promise<void> | undefined
  /** A previous channel of the same id that is still closing; opening waits for it. */
  after: Promise<void> | undefined

  constructor(meta: SessionMeta, seed: readonly SessionEvent[]) {
    this.id = meta.id
    this.meta = meta
    this.buffer = [...seed]
    this.expected = seed.length
    this.known = seed
  }

  /** Whether the stored events agree with what this channel knows (a resumed session, not a new one). */
  covers(stored: readonly SessionEvent[]): boolean {
    const known = this.known ?? []
    if (stored.length > this.knownFrom + known.length) return false
    for (let seq = this.knownFrom; seq < stored.length; seq++) {
      // Compare as JSON: the host's objects may carry `undefined` fields the log omits.
      const mine = JSON.parse(JSON.stringify(known[seq - this.knownFrom])) as unknown
      if (!isDeepStrictEqual(stored[seq], mine)) return false
    }
    return true
  }

  /** Marks events below `storedCount` as durable and drops them from the buffer. */
  storedUpTo(storedCount: number): void {
    const drop = Math.max(0, Math.min(this.buffer.length, storedCount - this.cursor))
    if (drop > 0) this.buffer.splice(0, drop)
    this.cursor = Math.max(this.cursor, storedCount)
    this.known = undefined
  }

  #wake: (() => void) | undefined

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

  clearTimers(): void {
    this.#wake?.()
    this.#wake = undefined
    if (this.flushTimer) clearTimeout(this.flushTimer)
    if (this.retryTimer) clearTimeout(this.retryTimer)
    this.flushTimer = undefined
    this.retryTimer = undefined
  }
}
