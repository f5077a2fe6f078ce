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
   * poll's timer), or when `signal` aborts. Armed before a `poll` (and kept across the polls
   * that follow one that found events), so no change is missed.
   */
  changed(signal: AbortSignal): Promise<void>
  /** Releases what the source holds (watchers, listeners, timers). */
  close(): void | Promise<void>
}

/** The watchers of each caller's signal, told by one 'abort' listener the signal holds. */
const abortWatchers = new WeakMap<AbortSignal, { watchers: Set<() => void>; fire: () => void }>()

/**
 * Calls `onAbort` when `signal` aborts, until the returned function is called. However many
 * watchers share a signal, it holds one listener: Node warns (`MaxListenersExceededWarning`) at a
 * signal's eleventh, and `events.addAbortListener` counts towards that too.
 */
function whenAborted(signal: AbortSignal, onAbort: () => void): () => void {
  let entry = abortWatchers.get(signal)
  if (!entry) {
    const watchers = new Set<() => void>()
    const fire = () => {
      if (abortWatchers.get(signal) === created) abortWatchers.delete(signal)
      for (const watcher of watchers) watcher()
    }
    const created = { watchers, fire }
    entry = created
    abortWatchers.set(signal, created)
    signal.addEventListener('abort', fire, { once: true })
  }
  const held = entry
  held.watchers.add(onAbort)
  return () => {
    held.watchers.delete(onAbort)
    if (held.watchers.size > 0) return
    signal.removeEventListener('abort', held.fire)
    if (abortWatchers.get(signal) === held) abortWatchers.delete(signal)
  }
}

/**
 * The loop every backend's `watch` runs (§15.3): the stored events from `fromSeq`, then each new
 * one as the source reports a change, each exactly once and in order. Waits while the session
 * does not exist; ends (without an error) once a session it has seen is gone, or on abort.
 */
export async function* watchLoop(source: WatchSource, fromSeq: number, signal: AbortSignal | undefined): AsyncGenerator<SessionEvent, void, undefined> {
  const stop = new AbortController()
  const forget = signal ? whenAborted(signal, () => stop.abort()) : undefined
  let next = fromSeq
  let seen = false
  // Armed before a poll and kept until awaited: after a poll that found events the loop polls
  // again at once, and the wait armed earlier still covers every change since (one promise, one
  // safety timer, per wait rather than per poll: a wake costs less on the way to the event).
  let change: Promise<void> | undefined
  try {
    while (!stop.signal.aborted && !signal?.aborted) {
      change ??= source.changed(stop.signal)
      const found = await source.poll(next)
      if (found.kind === 'missing') {
        if (seen) return
      } else {
        seen = true
        if (found.events.length > 0) {
          const before = next
          for (const event of found.events) {
            if (event.seq !== next) continue // never twice, never out of order
            next++
            yield event
            if (signal?.aborted) return
          }
          // Polled again at once only after a poll that moved on: one whose events were all
          // passed over waits for a change (a source that kept giving them polled for ever).
          if (next > before) continue
        }
      }
      await change
      change = undefined
    }
  } finally {
    forget?.()
    stop.abort()
    await source.close()
  }
}
