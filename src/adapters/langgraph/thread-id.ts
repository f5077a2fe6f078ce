import { createHash } from 'node:crypto'
import { MAX_ENCODED_ID_BYTES } from '../../index.js'
import { SessionPersistenceError } from '../../errors.js'

/** Sessions of threads: `langgraph:<thread_id>`, or `langgraph#<sha256>` when that is too long. */
export const THREAD_ID_PREFIX = 'langgraph:'
export const HASHED_ID_PREFIX = 'langgraph#'
/** The header field that names the thread a session holds (the id alone may be a hash). */
export const THREAD_META_FIELD = 'langgraphThreadId'

// In a `u` regex a surrogate pair is one code point, so this matches lone surrogates only.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/** The length of an id once percent-encoded (SPEC 3.2): bytes of `[a-z0-9_-]` are kept, others take 3. */
function encodedLength(id: string): number {
  let n = 0
  for (const byte of Buffer.from(id, 'utf8')) {
    const kept = (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x5f || byte === 0x2d
    n += kept ? 1 : 3
  }
  return n
}

/**
 * The session id of a thread. Injective: a thread id whose session id fits SPEC 3.2's 244
 * encoded bytes is kept readable after the prefix; a longer one is named by its SHA-256, under
 * another prefix, so the two forms never meet. The header records the thread id, and a thread
 * whose header names another thread (a hash collision) is refused, never mixed.
 */
export function threadSessionId(threadId: string): string {
  if (LONE_SURROGATE.test(threadId)) {
    // Lone surrogates would all hash alike (UTF-8 turns each into U+FFFD).
    throw new SessionPersistenceError('E_INVALID_ID', 'thread_id is not well-formed Unicode (lone surrogate)')
  }
  const plain = THREAD_ID_PREFIX + threadId
  if (encodedLength(plain) <= MAX_ENCODED_ID_BYTES) return plain
  return HASHED_ID_PREFIX + createHash('sha256').update(threadId, 'utf8').digest('hex')
}
