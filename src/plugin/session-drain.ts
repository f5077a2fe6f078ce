import type { SessionEvent } from '../session/schema.js'
import type { SessionPersistenceError } from '../errors.js'
import type { SessionPersistence } from '../persistence.js'
import type { SessionAdopter } from './adoption.js'
import { appendFailureClass, asPersistenceError, divergedError, DrainStalledError, EventRefusedError } from './plugin-errors.js'
import type { SessionChannel } from './session-channel.js'
import { DeadlineError } from './deadline.js'
import { cutAtKeptStarts } from '../session/kept-starts.js'
import { readField } from '../session/as-object.js'

const MIN_RETRY_MS = 50
const MAX_RETRY_MS = 5_000
/** The least time a drain may be in flight before it counts as stalled (a slow fsync is not a stall). */
export const STALLED_DRAIN_MIN_MS = 1_000
const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * How long a drain may stay in flight before the session's buffer is sized as if drains
 * failed: `flushDelayMs`, since a healthy session already holds that long's events unsized, but
 * at least `STALLED_DRAIN_MIN_MS`.
 */
export function stalledAfterMs(flushDelayMs: number): number {
  return Math.max(flushDelayMs, STALLED_DRAIN_MIN_MS)
}

/** What the drain needs from the plugin. */
export interface DrainContext {
  readonly backend: SessionPersistence
  readonly adopter: SessionAdopter
  readonly flushDelayMs: number
  isDisposed(): boolean
  /**
   * The deadline (ms) of the `dispose` that timed out waiting for the backend, once one has:
   * from then on no drain issues I/O, and the drains' outcomes are not reported (the sessions
   * were named in its `E_TIMEOUT`). The write in flight then completes, nothing after it.
   */
  abandonedAfterMs(): number | undefined
  report(error: SessionPersistenceError): void
  recovered(sessionId: string, after: SessionPersistenceError): void
}

/**
 * Moves buffered events into the backend, one serialized drain at a time per session. A passing
 * failure keeps the events and retries with backoff (reported when it starts or its code
 * changes, and again on recovery); an event the backend refuses halts the session after
 * writing the events before it.
 */
export class SessionDrainer {
  readonly #ctx: DrainContext
  readonly #stalledAfterMs: number

  constructor(ctx: DrainContext) {
    this.#ctx = ctx
    this.#stalledAfterMs = stalledAfterMs(ctx.flushDelayMs)
  }

  /**
   * Queues a drain after a tick (never on the host's call stack). A drain not yet queued will
   * take every event received so far, so a request made meanwhile (a flush right after a
   * turn/end) joins it instead of queuing an empty one.
   */
  drain(ch: SessionChannel): Promise<void> {
    ch.scheduledDrain ??= this.#drainAfterTick(ch)
    return ch.scheduledDrain
  }

  /** A drain whose failure is reported and retried, not returned. */
  drainSoon(ch: SessionChannel): void {
    void this.drain(ch).catch(() => {})
  }

  /** A drain at most `flushDelayMs` after the first event buffered since the last one. */
  drainLater(ch: SessionChannel): void {
    ch.flushTimer ??= setTimeout(() => this.drainSoon(ch), this.#ctx.flushDelayMs)
  }

  /**
   * Nothing more is accepted for `ch`; `error` is reported once and returned by every later
   * drain. With `dropBuffered`, the buffered events are discarded too (they can never be written).
   */
  halt(ch: SessionChannel, error: SessionPersistenceError, options: { dropBuffered: boolean }): void {
    if (ch.halted) return
    ch.halted = error
    if (options.dropBuffered) ch.dropBuffered()
    if (this.#ctx.abandonedAfterMs() === undefined) this.#ctx.report(error)
  }

  /**
   * After a timed-out dispose: the error a drain ends with instead of writing what `ch` still
   * buffers (named in that dispose's `E_TIMEOUT` already), or undefined when nothing is left.
   */
  #abandoned(ch: SessionChannel): SessionPersistenceError | undefined {
    const ms = this.#ctx.abandonedAfterMs()
    if (ms === undefined || ch.buffer.length === 0) return undefined
    return new DeadlineError(ch.id, ms, 'dispose')
  }

  async #drainAfterTick(ch: SessionChannel): Promise<void> {
    await nextTick()
    ch.scheduledDrain = undefined
    ch.clearFlushTimer()
    try {
      await ch.queue.add(() => this.#watched(ch, () => this.#drainJob(ch)))
    } catch (err) {
      const error = asPersistenceError(err, ch.id)
      if (error !== ch.halted) this.#failed(ch, error)
      // A halted session writes what it still holds and keeps nothing after: its share shrinks with its buffer.
      else if (ch.share.sizing) ch.share.recount(ch.buffer, { keepSizing: false })
      throw error
    }
    ch.retryDelayMs = 0
    if (ch.share.sizing) ch.share.recount(ch.buffer, { keepSizing: false })
  }

  /**
   * Runs one drain job. If it is still in flight after `stalledAfterMs` (the backend does not
   * answer: it neither succeeds nor fails), the session's buffer, the batch in flight included,
   * is sized from then on as while drains fail, so a hanging backend is bounded by
   * `maxBufferedBytes` too. A job that settles in time costs one timer and sizes nothing.
   */
  async #watched(ch: SessionChannel, job: () => Promise<void>): Promise<void> {
    const watchdog = setTimeout(() => {
      ch.stall = new DrainStalledError(ch.id, this.#stalledAfterMs)
      ch.lastFailure = ch.stall
      if (!ch.share.sizing) ch.share.recount(ch.buffer, { keepSizing: true })
    }, this.#stalledAfterMs)
    try {
      await job()
    } finally {
      clearTimeout(watchdog)
      ch.stall = undefined
    }
  }

  async #drainJob(ch: SessionChannel): Promise<void> {
    if (ch.halted && ch.buffer.length === 0) throw ch.halted
    // A dispose deadline passed: no new I/O (an open or an append), whatever is left is not written.
    const given = this.#abandoned(ch)
    if (given) throw given
    if (this.#ctx.abandonedAfterMs() !== undefined) return
    if (!ch.opened) {
      const refused = await this.#ctx.adopter.open(ch)
      if (refused) this.halt(ch, refused, { dropBuffered: true })
    }
    const late = this.#abandoned(ch) // the open was the I/O in flight at the deadline
    if (late) throw late
    if (ch.opened && ch.buffer.length > 0) await this.#writeBuffered(ch)
    if (ch.failure && ch.opened && this.#ctx.abandonedAfterMs() === undefined) {
      this.#ctx.recovered(ch.id, ch.failure)
      ch.failure = undefined
    }
    if (ch.halted) throw ch.halted
  }

  async #writeBuffered(ch: SessionChannel): Promise<void> {
    // Buffered events hold seqs cursor, cursor + 1, … (checked as they came). One the host changed
    // since (events are frozen, §8: a host that reuses an event object) would be refused by the
    // backend as a gap, which reads as "reopen and retry", for ever: the events before it are
    // written, then the session halts as diverged.
    const changed = firstChanged(ch.buffer, ch.cursor)
    const usable = changed < 0 ? ch.buffer.slice() : ch.buffer.slice(0, changed)
    // One append a part: a compaction's kept part starts an append of its own (kept-starts.ts).
    const parts = cutAtKeptStarts(usable)
    for (let i = 0; i < parts.length; i++) {
      const batch = parts[i]!
      if (i > 0) {
        const given = this.#abandoned(ch) // a new append: none after a dispose deadline
        if (given) throw given
      }
      try {
        await this.#ctx.backend.append(ch.id, batch)
        ch.written(batch.length)
      } catch (err) {
        const error = asPersistenceError(err, ch.id)
        const kind = appendFailureClass(error)
        if (kind === 'permanent') return this.#writeUntilRefused(ch, batch, error)
        if (kind === 'reopen') ch.needsReadoption()
        throw error
      }
    }
    if (changed >= 0) {
      this.halt(ch, divergedError(ch.id, `the event buffered at seq ${ch.cursor} now says seq ${String(readField(ch.buffer[0], 'seq'))}: the host changed it after emitting it (events must be frozen)`), { dropBuffered: true })
    }
  }

  /**
   * `batch` (the buffer's head) was refused. The backend writes nothing of a refused batch and
   * says which event it refused only in words, so the refused event is found by halving: each
   * accepted half is durable at once, each refused half is halved again. The session halts at
   * that event, with the events before it written. Works over any backend.
   */
  async #writeUntilRefused(ch: SessionChannel, batch: readonly SessionEvent[], refusal: SessionPersistenceError): Promise<void> {
    let suspects = batch
    let cause = refusal
    while (suspects.length > 1) {
      const given = this.#abandoned(ch) // the halving issues new appends: none after a dispose deadline
      if (given) throw given
      const head = suspects.slice(0, Math.ceil(suspects.length / 2))
      try {
        await this.#ctx.backend.append(ch.id, head)
        ch.written(head.length)
        suspects = suspects.slice(head.length)
      } catch (err) {
        const error = asPersistenceError(err, ch.id)
        const kind = appendFailureClass(error)
        if (kind !== 'permanent') {
          if (kind === 'reopen') ch.needsReadoption()
          throw error
        }
        suspects = head
        cause = error
      }
    }
    // One suspect is left, refused: judged by the count, since a refused "event" may be falsy (a null).
    if (suspects.length === 1) this.halt(ch, new EventRefusedError(ch.id, suspects[0]!, cause), { dropBuffered: true })
  }

  /** A passing failure: reported when it starts or its code changes, retried with backoff. */
  #failed(ch: SessionChannel, error: SessionPersistenceError): void {
    if (this.#ctx.abandonedAfterMs() !== undefined) return // named in the timed-out dispose; never retried
    if (ch.failure?.code !== error.code) this.#ctx.report(error)
    ch.failure = error
    ch.lastFailure = error
    if (!ch.share.sizing) ch.share.recount(ch.buffer, { keepSizing: true })
    if (this.#ctx.isDisposed() || ch.retryTimer) return
    ch.retryDelayMs = Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, ch.retryDelayMs * 2 || this.#ctx.flushDelayMs))
    if (ch.closing) return // the drain-then-close waits out the same backoff itself
    ch.retryTimer = setTimeout(() => {
      ch.retryTimer = undefined
      if (!this.#ctx.isDisposed() && !ch.closing) this.drainSoon(ch)
    }, ch.retryDelayMs)
  }

  /**
   * session/disposed: drain (retried while drains fail, until the plugin is disposed), then close
   * the session in the backend, releasing its lock. Never rejects: a failed close is reported,
   * and the session's buffers are released whatever happened.
   */
  async drainAndClose(ch: SessionChannel): Promise<void> {
    // Set before the first await: a dispose that comes now waits for the drain, not the close.
    let drained!: () => void
    ch.drained = new Promise<void>((resolve) => (drained = resolve))
    try {
      for (;;) {
        const finalAttempt = this.#ctx.isDisposed() // once dispose began, one more attempt and no more
        try {
          await this.drain(ch)
          ch.closedWith = undefined
          break
        } catch (err) {
          ch.closedWith = asPersistenceError(err, ch.id)
          if (ch.halted || finalAttempt || this.#ctx.abandonedAfterMs() !== undefined) break // nothing more can be written: close anyway
        }
        // Once dispose has begun, its one more attempt comes at once: the wake-up it sends
        // (clearTimers) may have fired while this attempt was in flight, before any sleep began,
        // and the backoff would then be slept in full, past a deadline the backend answered within.
        if (!this.#ctx.isDisposed()) await ch.sleep(ch.retryDelayMs || this.#ctx.flushDelayMs)
      }
      drained()
      ch.clearTimers()
      await ch.queue.add(() => this.#ctx.backend.close(ch.id))
    } catch (err) {
      this.#ctx.report(asPersistenceError(err, ch.id))
    } finally {
      drained()
      ch.clearTimers()
      ch.dropBuffered()
    }
  }
}

/** The index of the first buffered event whose seq is not `cursor + i` now, or -1. */
function firstChanged(buffer: readonly SessionEvent[], cursor: number): number {
  try {
    for (let i = 0; i < buffer.length; i++) if (buffer[i]!.seq !== cursor + i) return i
    return -1
  } catch {
    // One cannot be read any more: found read by read.
    return buffer.findIndex((e, i) => readField(e, 'seq') !== cursor + i)
  }
}
