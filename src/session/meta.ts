import { SessionPersistenceError } from '../errors.js'
import { encodeSessionId } from './id-encoding.js'
import { isPlainJson, plainJsonProblem } from './json-check.js'
import { knownValidMeta } from './meta-check.js'
import { type FormatVersion, sealLine } from './line-codec.js'
import { describeZodError, type SessionHeader, type SessionMeta, SessionMetaSchema } from './schema.js'

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
  const problem = isPlainJson(meta) ? undefined : plainJsonProblem(meta, 'meta')
  if (problem) {
    throw new SessionPersistenceError('E_INVALID_META', `invalid session meta: ${problem}`, {
      sessionId: typeof id === 'string' ? id : undefined,
    })
  }
  // The common case without zod (meta-check.ts); zod judges the rest and words the error.
  const known = knownValidMeta(meta as Record<string, unknown>)
  if (known) return known
  const result = SessionMetaSchema.safeParse(JSON.parse(JSON.stringify(meta)))
  if (!result.success) {
    throw new SessionPersistenceError('E_INVALID_META', `invalid session meta: ${describeZodError(result.error)}`, {
      sessionId: typeof id === 'string' ? id : undefined,
    })
  }
  return result.data
}

const HEADER_ORDER = ['id', 'cwd', 'createdAt', 'parentSession', 'seedLength', 'delegationDepth'] as const

/**
 * Line 1 of a log, keys in the order of docs/contract.md §3.3, extra fields after them in the
 * caller's order; in version 1 sealed with its checksum (§16).
 */
export function headerLine(meta: SessionMeta, version: FormatVersion = 0): string {
  const header: Record<string, unknown> = { type: 'session', version }
  for (const key of HEADER_ORDER) if (meta[key] !== undefined) header[key] = meta[key]
  for (const [key, value] of Object.entries(meta)) if (!(key in header)) header[key] = value
  return `${sealLine(JSON.stringify(header), version)}\n`
}

/** The meta a header describes: the header without `type`, `version` (and a checksum, which readers remove). */
export function metaFromHeader(header: SessionHeader): SessionMeta {
  const { type: _type, version: _version, ...meta } = header
  return meta
}
