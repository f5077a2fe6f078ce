import { SessionPersistenceError } from '../errors.js'
import type { HeldLock } from './lock/lease.js'
import type { LogWriter } from './log-writer.js'
import type { SessionMeta } from '../session/schema.js'
import { SerialOps } from '../session/serial.js'
import type { FormatVersion } from '../session/line-codec.js'

/** One session an instance writes (or is about to): created, loaded, forked or being deleted there. */
export interface Tracked {
  readonly id: string
  /** Serializes every operation of the session (load, fork, appends, close). */
  readonly ops: SerialOps
  meta: SessionMeta | undefined
  /** The format version its log is (or will be) written in (§16). */
  version: FormatVersion
  path: string | undefined
  /** Seq the next append must start with. */
  nextSeq: number
  /** Undefined until the first append materializes the log (or a load/fork opens it). */
  writer: LogWriter | undefined
  lock: HeldLock | undefined
  /** Set when a failed materialization could not be undone. */
  broken: SessionPersistenceError | undefined
  closing: Promise<void> | undefined
}

export function newTracked(id: string): Tracked {
  return {
    id,
    ops: new SerialOps(),
    meta: undefined,
    version: 0,
    path: undefined,
    nextSeq: 0,
    writer: undefined,
    lock: undefined,
    broken: undefined,
    closing: undefined,
  }
}

/** `E_NOT_FOUND` for an append to a session this instance has not opened; `E_INVALID_ID` for an id that is no string. */
export function notWritable(id: string): SessionPersistenceError {
  if (typeof id !== 'string') return new SessionPersistenceError('E_INVALID_ID', `session id must be a non-empty string, got ${typeof id}`)
  return new SessionPersistenceError(
    'E_NOT_FOUND',
    `session '${id}' is not open for appends in this instance (create, load or fork it first)`,
    { sessionId: id },
  )
}
