import type { SessionEvent } from '../session/schema.js'

/**
 * Bytes one event takes in a log: its JSON line and the newline. The plugin's one sizing rule.
 * An event that cannot be serialized (the backend will refuse it) counts as its newline only:
 * sizing runs on the host's call path and must never throw there.
 */
export function eventBytes(event: SessionEvent): number {
  try {
    return Buffer.byteLength(JSON.stringify(event) ?? '') + 1
  } catch {
    return 1
  }
}

/** The bytes buffered over all sessions while their drains fail or hang, against `maxBufferedBytes`. */
export class BufferBudget {
  readonly maxBytes: number
  #retained = 0

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  get retainedBytes(): number {
    return this.#retained
  }

  /** Counts `bytes` unless that would pass the limit; false means the event must be dropped. */
  tryReserve(bytes: number): boolean {
    if (this.#retained + bytes > this.maxBytes) return false
    this.#retained += bytes
    return true
  }

  /** Counts `bytes` whatever the limit (recounting events already held). */
  add(bytes: number): void {
    this.#retained += bytes
  }

  release(bytes: number): void {
    this.#retained = Math.max(0, this.#retained - bytes)
  }
}

/**
 * The share of one session: its buffered events are sized only while its drains fail or one has
 * been in flight too long (sizing every event on the host's hot path would cost a serialization
 * each), and counted until its buffer is empty again.
 */
export class BufferShare {
  readonly #budget: BufferBudget
  #bytes = 0
  #sizing = false

  constructor(budget: BufferBudget) {
    this.#budget = budget
  }

  get sizing(): boolean {
    return this.#sizing
  }

  /** For a new event while sizing: false when the budget is exhausted. */
  tryAdd(event: SessionEvent): boolean {
    const bytes = eventBytes(event)
    if (!this.#budget.tryReserve(bytes)) return false
    this.#bytes += bytes
    return true
  }

  /** Recounts what `buffer` holds now; `keepSizing` while a failure or a stall is unresolved. */
  recount(buffer: readonly SessionEvent[], options: { keepSizing: boolean }): void {
    this.#budget.release(this.#bytes)
    this.#bytes = 0
    for (const e of buffer) this.#bytes += eventBytes(e)
    this.#budget.add(this.#bytes)
    this.#sizing = options.keepSizing || buffer.length > 0
  }

  /** Stops counting this session (its buffer was dropped or the session is gone). */
  release(): void {
    this.#budget.release(this.#bytes)
    this.#bytes = 0
    this.#sizing = false
  }
}
