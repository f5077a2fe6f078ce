import { SessionPersistenceError } from '../errors.js'
import { printable, valueName } from '../session/value-name.js'

/** The options of `flush` and `dispose` (docs/contract.md §8, v0.3). */
export interface DeadlineOptions {
  /**
   * Reject with `E_TIMEOUT` once this many milliseconds have passed without the backend
   * answering. Omitted (or `Infinity`): wait as long as it takes.
   */
  timeoutMs?: number
}

/** setTimeout's largest delay; a longer one would fire at once. Longer deadlines are waited in steps. */
const MAX_TIMER_MS = 2_147_483_647

/**
 * Validates `flush`'s or `dispose`'s options once, at the edge: `undefined` (no deadline) or
 * the deadline in ms. Anything but a non-negative number (NaN, a string, a negative) is `E_CONFIG`.
 */
export function parseDeadline(options: unknown, what: string): number | undefined {
  if (options === undefined) return undefined
  let timeoutMs: unknown
  try {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new SessionPersistenceError('E_CONFIG', `${what}: options must be an object like { timeoutMs }, got ${valueName(options)}`)
    }
    timeoutMs = (options as { timeoutMs?: unknown }).timeoutMs
  } catch (err) {
    if (err instanceof SessionPersistenceError) throw err
    throw new SessionPersistenceError('E_CONFIG', `${what}: its options cannot be read (${printable(err)})`, { cause: err })
  }
  if (timeoutMs === undefined) return undefined
  if (typeof timeoutMs !== 'number' || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw new SessionPersistenceError('E_CONFIG', `${what}: timeoutMs must be a non-negative number of milliseconds, got ${valueName(timeoutMs)}`)
  }
  return timeoutMs === Number.POSITIVE_INFINITY ? undefined : timeoutMs
}

/**
 * `E_TIMEOUT`: a `flush` or `dispose` deadline passed before the backend answered for this
 * session. What could not be written stays buffered (`flush`) and is written once the backend
 * answers; the operation in flight is neither abandoned nor repeated.
 */
export class DeadlineError extends SessionPersistenceError {
  readonly timeoutMs: number

  constructor(sessionId: string, timeoutMs: number, what: string) {
    super('E_TIMEOUT', `session '${sessionId}': ${what} did not finish within ${timeoutMs} ms; the backend has not answered`, { sessionId })
    this.name = 'DeadlineError'
    this.timeoutMs = timeoutMs
  }
}

/** A timer that resolves after `ms` (in steps past setTimeout's range), and can be cancelled. */
export function deadlineTimer(ms: number): { expired: Promise<void>; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined
  let cancelled = false
  const expired = new Promise<void>((resolve) => {
    const end = performance.now() + ms
    const arm = () => {
      if (cancelled) return
      const left = end - performance.now()
      if (left <= 0) return resolve()
      timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS))
    }
    timer = setTimeout(arm, Math.min(ms, MAX_TIMER_MS))
  })
  return {
    expired,
    cancel() {
      cancelled = true
      if (timer) clearTimeout(timer)
    },
  }
}

/**
 * Settles `work` per session by `expired` (a deadline of `timeoutMs`; `undefined`: no deadline):
 * the error each one failed with, or a `DeadlineError` for each one still unsettled when the
 * deadline passes. The work itself goes on (its later outcome is handled by whoever owns it);
 * `done` never rejects, so nothing here is left rejected unhandled.
 */
export async function settleBy<K>(
  work: readonly SessionWork<K>[],
  deadline: { expired: Promise<void>; timeoutMs: number } | undefined,
  what: string,
): Promise<{ key: K; id: string; error: SessionPersistenceError }[]> {
  const outcome = new Map<K, SessionPersistenceError | undefined>()
  const all = Promise.all(work.map((w) => w.done.then((error) => void outcome.set(w.key, error))))
  await (deadline ? Promise.race([all, deadline.expired]) : all)
  return work.flatMap((w) => {
    if (!outcome.has(w.key)) return [{ key: w.key, id: w.id, error: new DeadlineError(w.id, deadline?.timeoutMs ?? 0, what) }]
    const error = outcome.get(w.key)
    return error ? [{ key: w.key, id: w.id, error }] : []
  })
}

/** One session's part of a flush or a dispose: settles with the error that left events not durable, if any. */
export interface SessionWork<K> {
  key: K
  id: string
  done: Promise<SessionPersistenceError | undefined>
}

/** A deadline of `timeoutMs` from now, or `undefined` for none. */
export function startDeadline(timeoutMs: number | undefined): ({ expired: Promise<void>; timeoutMs: number; cancel(): void }) | undefined {
  if (timeoutMs === undefined) return undefined
  return { ...deadlineTimer(timeoutMs), timeoutMs }
}
