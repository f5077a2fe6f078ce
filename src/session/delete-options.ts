import { z } from 'zod'
import { describeZodError } from './schema.js'
import { SessionPersistenceError } from '../errors.js'
import type { DeleteOptions } from '../persistence.js'

// The condition `delete` can be given (docs/contract.md §4.9), shared by every backend so that
// each validates it and refuses with the same code and wording.

// Strict: a key it does not know is refused, never ignored. A misspelt guard
// (`ifLastWriteBefore`) taken as no condition at all deleted the session unconditionally.
const DeleteOptionsSchema = z
  .strictObject({
    // A time as `SessionListing.mtimeMs` gives it: finite, possibly with a fraction of a ms.
    ifLastWriteAtOrBefore: z.number().finite().optional(),
  })
  .optional()

/** The validated options; `E_CONFIG` names a bad field. Checked before anything is locked. */
export function parseDeleteOptions(options: DeleteOptions | undefined, sessionId: string): DeleteOptions {
  const parsed = DeleteOptionsSchema.safeParse(options)
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid delete options: ${describeZodError(parsed.error)}`, {
      sessionId,
      cause: parsed.error,
    })
  }
  return parsed.data ?? {}
}

/**
 * Throws `E_SESSION_LIVE` when the session's last write (read under its lock) is later than the
 * time the caller allowed: someone resumed and wrote it since the caller last looked, so it is
 * in use again and must not be deleted.
 */
export function assertNotWrittenSince(
  options: DeleteOptions,
  lastWriteMs: number,
  details: { sessionId: string; path?: string | undefined },
): void {
  const limit = options.ifLastWriteAtOrBefore
  if (limit === undefined || lastWriteMs <= limit) return
  throw new SessionPersistenceError(
    'E_SESSION_LIVE',
    `session '${details.sessionId}' was written at ${when(lastWriteMs)}, after the given time ${when(limit)}; nothing was deleted`,
    details,
  )
}

/** A time for a message: ISO when a `Date` can hold it (±8.64e15 ms), else the number of ms. */
function when(ms: number): string {
  return Math.abs(ms) <= 8.64e15 ? new Date(ms).toISOString() : `${ms} ms since the epoch`
}
