import { SessionPersistenceError } from '../errors.js'

/** `code` when `id` is already tracked (opened, created or being written) by this instance: every backend says it so. */
export function alreadyTracked(id: string, code: 'E_EXISTS' | 'E_SESSION_LIVE'): SessionPersistenceError {
  return new SessionPersistenceError(
    code,
    code === 'E_EXISTS'
      ? `session '${id}' is already open in this instance`
      : `session '${id}' is being written by this instance; close it before loading it again`,
    { sessionId: id },
  )
}
