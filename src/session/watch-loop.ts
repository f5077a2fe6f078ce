import type { SessionEvent } from './schema.js'

/** What one look at a watched session found. */
export type WatchPoll =
  | { kind: 'events'; events: readonly SessionEvent[] }
  /** No log of that id (not yet, or no longer). */
  | { kind: 'missing' }

export interface WatchSource {
  /** The stored events from seq `next` on (possibly none). */
  poll(next: number): Promise<WatchPoll>
  /**
   * Resolves at the next sign that the session may have changed (a notification, or the safety
   * poll's timer), or when `signal` aborts. Armed before each `poll`, so no change is missed.
   */
  changed(signal: AbortSignal): Promise<void>
  /** Releases what the source holds (watchers, listeners, timers). */
  close(): void | Promise<void>
}

/**
 * The loop every backend's `watch` runs (§15.3): the stored events from `fromSeq`, then each new
 * one as the source reports a change, each exactly once and in order. Waits while the session
 * does not exist; ends (without an error) once a session it has seen is gone, or on abort.
 */
export async function* watchLoop(source: WatchSource, fromSeq: number, signal: AbortSignal | undefined): AsyncGenerator<SessionEvent, void, undefined> {
  const stop = new AbortController()
  const onAbort = () => stop.abort()
  signal?.addEventListener('abort', onAbort, { once: true })
  let next = fromSeq
  let seen = false
  try {
    while (!stop.signal.aborted && !signal?.aborted) {
      const waiting = new AbortController()
      const change = source.changed(AbortSignal.any([stop.signal, waiting.signal]))
      const found = await source.poll(next)
      if (found.kind === 'missing') {
        if (seen) return
      } else {
        seen = true
        if (found.events.length > 0) {
          waiting.abort() // read again at once after yielding: more may be there already
          await change.catch(() => {})
          for (const event of found.events) {
            if (event.seq !== next) continue // never twice, never out of order
            next++
            yield event
            if (signal?.aborted) return
          }
          continue
        }
      }
      await change
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
    stop.abort()
    await source.close()
  }
}
