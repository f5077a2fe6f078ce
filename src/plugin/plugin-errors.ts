import type { SessionEvent } from '../session/schema.js'
import { readField } from '../session/as-object.js'
import { type ErrorCode, isSessionPersistenceError, SessionPersistenceError } from '../errors.js'

/**
 * How a drain answers a failure of the backend:
 * - `passing`: keep the events buffered and retry with backoff (a full disk, an I/O error);
 * - `reopen`: as `passing`, but the backend's writer state for the session cannot be trusted
 *   any more (a broken writer, a lost lock, a session the backend no longer has open, a log
 *   that does not continue where the plugin thought, a log another instance published first):
 *   close the session and adopt it again from what is stored before the retry;
 * - `permanent`: the backend refuses an event; retrying can never succeed.
 */
export type FailureClass = 'passing' | 'reopen' | 'permanent'

const REOPEN: ReadonlySet<ErrorCode> = new Set(['E_WRITER_BROKEN', 'E_LOCKED', 'E_NOT_FOUND', 'E_SEQ_NOT_CONTIGUOUS', 'E_EXISTS'])
const PERMANENT: ReadonlySet<ErrorCode> = new Set(['E_NOT_JSON', 'E_INVALID_EVENT'])

/** The class of a failed `append`. Anything not known to be permanent is retried. */
export function appendFailureClass(error: SessionPersistenceError): FailureClass {
  if (PERMANENT.has(error.code)) return 'permanent'
  if (REOPEN.has(error.code)) return 'reopen'
  return 'passing'
}

/** Whatever a backend threw, as a package error (a foreign error becomes `E_IO` with it as `cause`). */
export function asPersistenceError(err: unknown, sessionId: string): SessionPersistenceError {
  if (isSessionPersistenceError(err)) return err
  return new SessionPersistenceError('E_IO', `session '${sessionId}': ${String(err)}`, { sessionId, cause: err })
}

export function disposedError(what: string, sessionId?: string): SessionPersistenceError {
  return new SessionPersistenceError('E_DISPOSED', `${what} after the plugin was disposed; not written`, { sessionId })
}

/**
 * The backend refused one of the host's events for good (`E_NOT_JSON`, `E_INVALID_EVENT`: the
 * backend's code, and its error as `cause`). The events before it are written; nothing from
 * `seq` on is written for that session until the host disposes and re-creates it.
 */
export class EventRefusedError extends SessionPersistenceError {
  readonly seq: number
  readonly eventType: string

  constructor(sessionId: string, event: SessionEvent, refusal: SessionPersistenceError) {
    // The refused event may be no object at all (a null the host sent), or one whose fields
    // cannot be read (a throwing getter: why it was refused): its seq and type are what can be read.
    const seq = readField(event, 'seq') as number | undefined
    const type = readField(event, 'type') as string | undefined
    super(
      refusal.code,
      `session '${sessionId}': the backend refused event ${String(seq)} (${String(type)}): ${refusal.message}; the events before it are written, nothing from seq ${String(seq)} on is written until the host disposes and re-creates the session`,
      { sessionId, cause: refusal },
    )
    this.name = 'EventRefusedError'
    this.seq = seq as number
    this.eventType = type as string
  }
}

/** The host and the log disagree: a seq gap, or a stored log that no longer continues with the host's events. */
export function divergedError(sessionId: string, what: string): SessionPersistenceError {
  return new SessionPersistenceError(
    'E_SEQ_NOT_CONTIGUOUS',
    `session '${sessionId}': ${what}; the host and the log diverged, nothing more is written for this session`,
    { sessionId },
  )
}

/**
 * A drain of the session has been in flight for `afterMs` without settling: the backend has
 * not answered (a stalled network mount, a database server that stopped responding). It is not
 * a failure the backend reported; its code is `E_IO` because the storage does not answer. From
 * then on the session's buffered events count against `maxBufferedBytes`, and this is the
 * `cause` of every event dropped while the drain hangs.
 */
export class DrainStalledError extends SessionPersistenceError {
  readonly afterMs: number

  constructor(sessionId: string, afterMs: number) {
    super(
      'E_IO',
      `session '${sessionId}': a drain has been in flight for ${afterMs} ms and the backend has not answered; buffered events count against maxBufferedBytes until it does`,
      { sessionId },
    )
    this.name = 'DrainStalledError'
    this.afterMs = afterMs
  }
}

/**
 * One host event the plugin dropped because `maxBufferedBytes` were buffered while drains failed
 * or hung. Its `code` is the code of the drain failure that kept the events in memory (`E_IO` for
 * a full disk, `E_LOCKED` for a lock held elsewhere…), and that failure is its `cause`; for a
 * drain that hangs, the cause is a `DrainStalledError` (`E_IO`). `name`, `seq` and `eventType`
 * tell it apart from the failure's own report.
 */
export class EventDroppedError extends SessionPersistenceError {
  readonly seq: number
  readonly eventType: string
  readonly maxBufferedBytes: number

  constructor(sessionId: string, event: SessionEvent, maxBufferedBytes: number, failure: SessionPersistenceError | undefined) {
    super(
      failure?.code ?? 'E_IO',
      `session '${sessionId}': event ${event.seq} (${event.type}) dropped: ${maxBufferedBytes} bytes are buffered over all sessions while drains ${why(failure)}; nothing from the first dropped event on is written for this session`,
      { sessionId, cause: failure },
    )
    this.name = 'EventDroppedError'
    this.seq = event.seq
    this.eventType = event.type
    this.maxBufferedBytes = maxBufferedBytes
  }
}

function why(failure: SessionPersistenceError | undefined): string {
  if (failure instanceof DrainStalledError) return `fail or hang (a drain got no answer from the backend for ${failure.afterMs} ms)`
  return `fail${failure ? ` (${failure.code})` : ''}`
}
