/** Every stable error code of the package (docs/contract.md §9). Codes never change; messages may. */
export const ERROR_CODES = [
  'E_CONFIG',
  'E_INVALID_ID',
  'E_INVALID_META',
  'E_INVALID_EVENT',
  'E_NOT_JSON',
  'E_SEQ_NOT_CONTIGUOUS',
  'E_NOT_FOUND',
  'E_EXISTS',
  'E_AMBIGUOUS',
  'E_CORRUPT',
  'E_FORMAT_UNSUPPORTED',
  'E_LOCKED',
  'E_SESSION_LIVE',
  'E_BAD_FORK_POINT',
  'E_LINK_UNSUPPORTED',
  'E_IO',
  'E_WRITER_BROKEN',
  'E_DISPOSED',
  'E_TIMEOUT',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

// A registry-wide symbol, so two copies of this package recognise each other's errors.
const BRAND = Symbol.for('session-persistence-jsonl/error')

/**
 * Who holds a session's writer lock, as far as it is known (`E_LOCKED`). `since` is when the
 * holder took the lock, in epoch milliseconds.
 */
export interface LockHolder {
  readonly pid: number
  readonly host: string
  readonly since: number
}

export interface ErrorDetails {
  sessionId?: string | undefined
  path?: string | undefined
  cause?: unknown
  /** `E_LOCKED`: the lock's holder. */
  holder?: LockHolder | undefined
}

/** The one error type the package throws on purpose. Compare `code`, never `message`. */
export class SessionPersistenceError extends Error {
  readonly code: ErrorCode
  readonly sessionId: string | undefined
  readonly path: string | undefined
  /** Set on `E_LOCKED` when the holder of the lock is known (pid, host, since in epoch ms). */
  readonly holder: LockHolder | undefined

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause })
    this.name = 'SessionPersistenceError'
    this.code = code
    this.sessionId = details.sessionId
    this.path = details.path
    this.holder = details.holder === undefined ? undefined : Object.freeze({ ...details.holder })
    Object.defineProperty(this, BRAND, { value: true })
  }
}

/** `E_FORMAT_UNSUPPORTED`: a header version this release cannot read. Nothing is migrated. */
export class SessionFormatUnsupportedError extends SessionPersistenceError {
  readonly version: number
  constructor(version: number, message: string, details: ErrorDetails = {}) {
    super('E_FORMAT_UNSUPPORTED', message, details)
    this.name = 'SessionFormatUnsupportedError'
    this.version = version
  }
}

/** `E_CORRUPT`: committed history is damaged; carries the 1-based `line` and its `byteOffset`. */
export class SessionPersistenceCorruptionError extends SessionPersistenceError {
  readonly line: number
  readonly byteOffset: number
  readonly reason: string
  constructor(line: number, byteOffset: number, reason: string, details: ErrorDetails = {}) {
    super(
      'E_CORRUPT',
      // A byte offset of -1 is one not tracked (a database row): not shown.
      `corrupt session log${details.path ? ` ${details.path}` : ''}: line ${line}${byteOffset >= 0 ? ` (byte ${byteOffset})` : ''}: ${reason}`,
      details,
    )
    this.name = 'SessionPersistenceCorruptionError'
    this.line = line
    this.byteOffset = byteOffset
    this.reason = reason
  }
}

/** True for errors of this package, also when they come from another installed copy of it. */
export function isSessionPersistenceError(err: unknown, code?: ErrorCode): err is SessionPersistenceError {
  if (typeof err !== 'object' || err === null) return false
  if ((err as Record<symbol, unknown>)[BRAND] !== true) return false
  return code === undefined || (err as { code?: unknown }).code === code
}

/** Wraps a system error from the file system as `E_IO`, keeping it as `cause`. */
export function ioError(err: unknown, what: string, details: ErrorDetails = {}): SessionPersistenceError {
  if (isSessionPersistenceError(err)) return err
  const sys = err as NodeJS.ErrnoException
  const message = sys?.message ?? String(err)
  // Node's own messages start with their code already ("EACCES: permission denied, …").
  const code = typeof sys?.code === 'string' && !message.startsWith(`${sys.code}:`) ? `${sys.code}: ` : ''
  return new SessionPersistenceError('E_IO', `${what} failed: ${code}${message}`, {
    ...details,
    cause: err,
  })
}
