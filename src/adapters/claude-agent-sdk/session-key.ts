import { createHash } from 'node:crypto'
import { encodeSessionId, MAX_ENCODED_ID_BYTES, SessionPersistenceError } from '../../index.js'

/** The meta field that names the key a session stores (and the field `listSessions` groups by). */
export const KEY_FIELD = 'claudeAgentSdk'

/** A key as stored in a session's header: exactly the SDK's key, `subpath` only when set. */
export interface StoredKey {
  projectKey: string
  sessionId: string
  subpath?: string
}

const LONE_SURROGATE = /[\uD800-\uDFFF]/u

function part(value: unknown, name: string, optional: boolean): string | undefined {
  if (value === undefined && optional) return undefined
  if (typeof value !== 'string' || value.length === 0) {
    throw new SessionPersistenceError('E_INVALID_ID', `SessionKey.${name} must be a non-empty string${optional ? ' or absent' : ''}, got ${describe(value)}`)
  }
  if (LONE_SURROGATE.test(value)) {
    throw new SessionPersistenceError('E_INVALID_ID', `SessionKey.${name} is not well-formed Unicode (lone surrogate)`)
  }
  return value
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return value.length === 0 ? 'an empty string' : JSON.stringify(value)
  return `a ${typeof value}`
}

/** Validates a key (`E_INVALID_ID`: not an object, an empty or non-string part, a lone surrogate). */
export function parseKey(key: unknown): StoredKey {
  if (typeof key !== 'object' || key === null || Array.isArray(key)) {
    throw new SessionPersistenceError('E_INVALID_ID', `SessionKey must be an object, got ${describe(key)}`)
  }
  const k = key as Record<string, unknown>
  const projectKey = part(k.projectKey, 'projectKey', false)!
  const sessionId = part(k.sessionId, 'sessionId', false)!
  const subpath = part(k.subpath, 'subpath', true)
  return subpath === undefined ? { projectKey, sessionId } : { projectKey, sessionId, subpath }
}

/** Validates the `projectKey` argument of `listSessions` and `listSubkeys`. */
export function parseProjectKey(projectKey: unknown): string {
  return part(projectKey, 'projectKey', false)!
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex')

// `%` escapes itself and the separators, so each part is recovered exactly from the id.
const escapeParts = (s: string, chars: RegExp) =>
  s.replace(chars, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
const IN_SESSION_ID = /[%/@#]/g
const IN_SUBPATH = /[%@#]/g

/** How many hex digits of the projectKey's SHA-256 the readable form carries (64 bits). */
const PROJECT_HASH_HEX = 16
/** How many hex digits of the whole key's SHA-256 the hashed form carries (128 bits). */
const KEY_HASH_HEX = 32
/** The readable prefix of the hashed form stays within this many encoded bytes. */
const HASHED_PREFIX_BYTES = 96

/**
 * The persistence session id of a key. Readable form, used whenever it fits SPEC 3.2's 244
 * encoded bytes: `<sessionId>[/<subpath>]@<16 hex of sha256(projectKey)>`, with `%`, `/`, `@`
 * and `#` percent-escaped inside the session id (and `%`, `@`, `#` inside the subpath), so the
 * parts are recovered exactly and `session-jsonl show <uuid prefix>` finds the session. A key
 * too long for it gets the hashed form `<readable prefix>#<32 hex of sha256 of the whole key>`;
 * the two forms never meet (only the second holds an unescaped `#`). The header also stores the
 * key itself, and every read checks it: a hash collision is refused (`E_EXISTS`), never merged.
 */
export function sessionIdOf(key: StoredKey): string {
  const sid = escapeParts(key.sessionId, IN_SESSION_ID)
  const readable = `${sid}${key.subpath === undefined ? '' : `/${escapeParts(key.subpath, IN_SUBPATH)}`}@${sha256(key.projectKey).slice(0, PROJECT_HASH_HEX)}`
  if (encodedLength(readable) <= MAX_ENCODED_ID_BYTES) return readable
  const digest = sha256(JSON.stringify([key.projectKey, key.sessionId, key.subpath ?? null])).slice(0, KEY_HASH_HEX)
  return `${prefixWithin(sid, HASHED_PREFIX_BYTES)}#${digest}`
}

function encodedLength(id: string): number {
  try {
    return encodeSessionId(id).length
  } catch {
    return Infinity
  }
}

/** The longest prefix of `s` (whole code points) whose encoding fits in `bytes`. */
function prefixWithin(s: string, bytes: number): string {
  let out = ''
  let used = 0
  for (const ch of s) {
    const cost = encodeSessionId(ch).length
    if (used + cost > bytes) break
    out += ch
    used += cost
  }
  return out
}

/** The key a session's meta stores, or undefined when the session was not written by a store. */
export function storedKeyOf(meta: Record<string, unknown>): StoredKey | undefined {
  const raw = meta[KEY_FIELD]
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined
  const k = raw as Record<string, unknown>
  if (typeof k.projectKey !== 'string' || typeof k.sessionId !== 'string') return undefined
  if (k.subpath !== undefined && typeof k.subpath !== 'string') return undefined
  return typeof k.subpath === 'string' ? { projectKey: k.projectKey, sessionId: k.sessionId, subpath: k.subpath } : { projectKey: k.projectKey, sessionId: k.sessionId }
}

/**
 * Whether a delete of `deleted` takes `key`: the key itself, and for a main key (no `subpath`)
 * each of its subkeys, nothing else.
 */
export function deleteCovers(deleted: StoredKey, key: StoredKey): boolean {
  if (key.projectKey !== deleted.projectKey || key.sessionId !== deleted.sessionId) return false
  return deleted.subpath === undefined || key.subpath === deleted.subpath
}

export function sameKey(a: StoredKey | undefined, b: StoredKey): boolean {
  return a !== undefined && a.projectKey === b.projectKey && a.sessionId === b.sessionId && a.subpath === b.subpath
}

/** Refuses a session stored under `id` that holds another key (a hash collision, a foreign log). */
export function assertKey(meta: Record<string, unknown>, key: StoredKey, id: string): void {
  if (sameKey(storedKeyOf(meta), key)) return
  throw new SessionPersistenceError(
    'E_EXISTS',
    `session '${id}' exists but does not hold the Claude Agent SDK key ${JSON.stringify(key)} (it holds ${JSON.stringify(meta[KEY_FIELD] ?? null)}); nothing was read or written`,
    { sessionId: id },
  )
}

export function describeKey(key: StoredKey): string {
  return `${key.projectKey}/${key.sessionId}${key.subpath === undefined ? '' : `/${key.subpath}`}`
}
