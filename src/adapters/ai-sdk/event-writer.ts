import { serializeEvents } from '../../session/prepare-batch.js'
import type { SessionEvent } from '../../session/schema.js'
import type { SessionPersistence } from '../../persistence.js'
import type { EventDraft } from './from-messages.js'

/**
 * The adapter's one path to the backend: batches are appended one after the other, in order,
 * each resolving when durable. Seqs are given when a batch is queued, so batches queued
 * concurrently (parallel tool calls) keep the log contiguous. A batch the backend would refuse
 * for what it holds (`E_INVALID_EVENT`: a line over 64 MiB; `E_NOT_JSON`) is refused when it is
 * queued, before it takes a seq: the writer is then exactly as before. After a failed append
 * the writer is broken: every later batch rejects with the same error and nothing more is
 * written, since the seqs already given out would leave a gap.
 */
export class EventWriter {
  readonly #persistence: SessionPersistence
  readonly #sessionId: string
  readonly #now: () => number
  #events: SessionEvent[]
  #firstSeq: number
  #nextSeq: number
  #tail: Promise<void> = Promise.resolve()
  #broken: { error: unknown } | undefined

  /** `events` are the loaded log from `firstSeq` on (a load from the last compaction starts later than 0). */
  constructor(persistence: SessionPersistence, sessionId: string, events: readonly SessionEvent[], firstSeq: number, now: () => number) {
    this.#persistence = persistence
    this.#sessionId = sessionId
    this.#now = now
    this.#events = [...events]
    this.#firstSeq = firstSeq
    this.#nextSeq = firstSeq + events.length
  }

  /** The durable events held, from `firstSeq` on: the loaded log and every batch appended since. */
  get events(): readonly SessionEvent[] {
    return this.#events
  }

  /** The seq of `events[0]`. */
  get firstSeq(): number {
    return this.#firstSeq
  }

  /** The seq the next queued event gets. */
  get nextSeq(): number {
    return this.#nextSeq
  }

  /**
   * Moves the start of the events held to `seq`: events before it are let go; for a `seq` before
   * the current start, `earlier` are the durable events `seq <= s < firstSeq`, read from the log.
   */
  rebase(seq: number, earlier: readonly SessionEvent[] = []): void {
    if (seq < this.#firstSeq) {
      this.#events = [...earlier, ...this.#events]
    } else {
      this.#events = this.#events.slice(Math.min(seq, this.#firstSeq + this.#events.length) - this.#firstSeq)
    }
    this.#firstSeq = seq
  }

  /** The error that broke the writer, if one did. */
  get failure(): { error: unknown } | undefined {
    return this.#broken
  }

  /** What the log will hold once everything queued is durable, with `drafts` as the next events. */
  preview(drafts: readonly EventDraft[]): SessionEvent[] {
    const time = this.#now()
    return [...this.#events, ...drafts.map((d, i) => this.#event(d, this.#nextSeq + i, time))]
  }

  /**
   * `drafts` as the events of the next batch (seqs from `nextSeq`, or `offset` later), checked as
   * the backend checks a batch, as version 1 writes it (the longer line: a version-0 log refuses
   * up to 17 bytes early). Throws what the backend would refuse the batch with; takes no seq.
   */
  prepare(drafts: readonly EventDraft[], offset = 0): SessionEvent[] {
    const time = this.#now()
    const batch = drafts.map((d, i) => this.#event(d, this.#nextSeq + offset + i, time))
    if (!this.#broken) serializeEvents(this.#sessionId, batch, 1)
    return batch
  }

  /** Queues one batch; resolves when it is durable. An empty batch waits for the queued ones. */
  append(drafts: readonly EventDraft[]): Promise<void> {
    if (this.#broken) return Promise.reject(this.#broken.error)
    if (drafts.length === 0) return this.#tail.then(() => this.#rethrow())
    let batch: SessionEvent[]
    try {
      batch = this.prepare(drafts)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.enqueue(batch)
  }

  /** Queues a batch `prepare` gave (nothing queued since); resolves when it is durable. */
  enqueue(batch: readonly SessionEvent[]): Promise<void> {
    if (this.#broken) return Promise.reject(this.#broken.error)
    if (batch.length === 0) return this.#tail.then(() => this.#rethrow())
    if (batch[0]!.seq !== this.#nextSeq) return Promise.reject(new Error(`internal: a batch prepared at seq ${batch[0]!.seq} queued at ${this.#nextSeq}`))
    this.#nextSeq += batch.length
    const run = this.#tail.then(async () => {
      this.#rethrow()
      try {
        await this.#persistence.append(this.#sessionId, batch)
      } catch (error) {
        this.#broken ??= { error }
        throw error
      }
      this.#events.push(...batch)
    })
    this.#tail = run.catch(() => undefined)
    return run
  }

  #rethrow(): void {
    if (this.#broken) throw this.#broken.error
  }

  #event(draft: EventDraft, seq: number, time: number): SessionEvent {
    const event: SessionEvent = { seq, type: draft.type, time, data: draft.data }
    if (draft.ignorable) event.ignorable = true
    return event
  }
}
