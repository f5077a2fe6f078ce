import { SessionPersistenceError } from '../errors.js'
import { encodeSessionId } from './id-encoding.js'
import { isPlainJson, plainJsonProblem } from './json-check.js'
import { type JsonObject, setField } from './as-object.js'
import { knownValidMeta } from './meta-check.js'
import { type FormatVersion, sealLine } from './line-codec.js'
import { describeZodError, type SessionHeader, type SessionMeta, SessionMetaSchema } from './schema.js'
// The readers' limit on line 1 (only the constant: read-session.ts imports this module too).
import { MAX_HEADER_BYTES } from './header-line.js'

/**
 * How deep a meta may nest (the meta object itself is level 0): a header is small (§4.2), and a
 * deeper one was accepted here and then ran readers and copies out of stack (`E_IO` on load).
 */
export const MAX_META_DEPTH = 100

/**
 * Validates caller-given meta once, at the edge (docs/contract.md §2, §3.2): `E_INVALID_ID` for the id,
 * `E_INVALID_META` for the rest. Returns a plain-JSON copy without `undefined` fields.
 */
export function validateMeta(meta: unknown): SessionMeta {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) {
    throw new SessionPersistenceError('E_INVALID_META', 'session meta must be an object')
  }
  const id = (meta as { id?: unknown }).id
  if (typeof id === 'string') encodeSessionId(id)
  // Bounded (MAX_META_DEPTH): every reader, and the in-memory backend's copies, must handle
  // what is accepted here without running out of stack.
  const problem = isPlainJson(meta) ? undefined : plainJsonProblem(meta, 'meta', [], MAX_META_DEPTH)
  if (problem) {
    throw new SessionPersistenceError('E_INVALID_META', `invalid session meta: ${problem}`, {
      sessionId: typeof id === 'string' ? id : undefined,
    })
  }
  // A field named `__proto__` (at any depth) is refused: every reader drops it (zod does, and an
  // assignment of that key sets a prototype), so it would be accepted and never read back.
  const proto = protoKeyPath(meta, [])
  if (proto) {
    throw new SessionPersistenceError('E_INVALID_META', `invalid session meta: a field named "__proto__" (${proto}) cannot be stored: no reader would give it back`, {
      sessionId: typeof id === 'string' ? id : undefined,
    })
  }
  // The common case without zod (meta-check.ts); zod judges the rest and words the error.
  const known = knownValidMeta(meta as Record<string, unknown>)
  if (known) return fitsHeaderLine(known)
  const result = SessionMetaSchema.safeParse(JSON.parse(JSON.stringify(meta)))
  if (!result.success) {
    throw new SessionPersistenceError('E_INVALID_META', `invalid session meta: ${describeZodError(result.error)}`, {
      sessionId: typeof id === 'string' ? id : undefined,
    })
  }
  return fitsHeaderLine(result.data)
}

/** Where plain JSON `value` holds an own key `__proto__` (`meta.a.__proto__`), if it does. */
function protoKeyPath(value: unknown, at: string[]): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  if (!Array.isArray(value) && Object.hasOwn(value, '__proto__')) return ['meta', ...at, '__proto__'].join('.')
  for (const [key, v] of Object.entries(value)) {
    const found = protoKeyPath(v, [...at, key])
    if (found) return found
  }
  return undefined
}

/** What a checksum adds to a header line (§16): the same bytes whatever the meta. */
let sealBytes: number | undefined

/**
 * `meta`, when its header line fits what every reader reads of line 1 (`MAX_HEADER_BYTES`, §4.2):
 * the line as version 1 writes it, checksum and newline included, whatever version the backend
 * writes (a log may be migrated to version 1, or copied to another backend). Else
 * `E_INVALID_META`: a longer header would be written and then read as `E_CORRUPT`.
 */
function fitsHeaderLine(meta: SessionMeta): SessionMeta {
  sealBytes ??= Buffer.byteLength(headerLine(SEAL_PROBE, 1)) - Buffer.byteLength(headerLine(SEAL_PROBE, 0))
  const bytes = Buffer.byteLength(headerLine(meta, 0)) + sealBytes
  if (bytes > MAX_HEADER_BYTES) {
    throw new SessionPersistenceError(
      'E_INVALID_META',
      `session meta too large: its header line would be ${bytes} bytes (checksum and newline included), over the limit of ${MAX_HEADER_BYTES} bytes a header line may hold`,
      { sessionId: meta.id },
    )
  }
  return meta
}

const SEAL_PROBE: SessionMeta = { id: 'x', createdAt: 0, delegationDepth: 0 }

const HEADER_ORDER = ['id', 'cwd', 'createdAt', 'parentSession', 'seedLength', 'delegationDepth'] as const

/**
 * Line 1 of a log, keys in the order of docs/contract.md §3.3, extra fields after them in the
 * caller's order; in version 1 sealed with its checksum (§16).
 */
export function headerLine(meta: SessionMeta, version: FormatVersion = 0): string {
  const header: Record<string, unknown> = { type: 'session', version }
  for (const key of HEADER_ORDER) if (meta[key] !== undefined) header[key] = meta[key]
  // Own keys only: `in` also sees Object.prototype's (`constructor`, `toString`…), and such a
  // field was left out of the line without a word.
  for (const [key, value] of Object.entries(meta)) if (!Object.hasOwn(header, key)) setField(header as JsonObject, key, value)
  return `${sealLine(JSON.stringify(header), version)}\n`
}

/** The meta a header describes: the header without `type`, `version` (and a checksum, which readers remove). */
export function metaFromHeader(header: SessionHeader): SessionMeta {
  const { type: _type, version: _version, ...meta } = header
  return meta
}
