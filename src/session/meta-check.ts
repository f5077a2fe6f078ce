// Hot-path twin of SessionMetaSchema (schema.ts). Every new session validates its meta, and in
// a new session's conditions (the event loop just woke from waiting on a sync, caches cold) zod
// measured 30–100 µs there against a few µs for this. test/meta-matches-schema.test.ts proves
// both agree; anything this does not accept goes to zod, which decides and words the error.
import { isAbsolute } from 'node:path'
import type { SessionHeader, SessionMeta } from './schema.js'

const SHAPE = new Set(['id', 'createdAt', 'cwd', 'parentSession', 'seedLength', 'delegationDepth'])

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0

const UNJUDGED = Symbol('left to zod')

/**
 * A value as JSON.parse(JSON.stringify(v)) gives it back (v is known to be plain JSON), or
 * UNJUDGED when it may hold a `__proto__` key, which zod drops (also a string "__proto__": a
 * false alarm only costs the slow path).
 */
function jsonCopy(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return Object.is(v, -0) ? 0 : v
  const text = JSON.stringify(v)
  return text.includes('"__proto__"') ? UNJUDGED : JSON.parse(text)
}

/**
 * The meta zod would return for `meta` (plain JSON, `undefined` properties allowed): a copy
 * without `undefined` fields, the known fields in the schema's order, then the others in the
 * caller's. Undefined when `meta` is not valid, or is valid in a way only zod should judge (a
 * `__proto__` key, at any depth).
 */
export function knownValidMeta(meta: Record<string, unknown>): SessionMeta | undefined {
  // zod sees the JSON copy, which holds own enumerable keys only: a known field that is
  // inherited or not enumerable is not there for zod, so zod judges it.
  for (const key of SHAPE) if (meta[key] !== undefined && !Object.prototype.propertyIsEnumerable.call(meta, key)) return undefined
  const { id, createdAt, cwd, parentSession, seedLength, delegationDepth } = meta
  if (typeof id !== 'string' || id.length === 0 || !isCount(createdAt) || !isCount(delegationDepth)) return undefined
  if (cwd !== undefined && (typeof cwd !== 'string' || !isAbsolute(cwd))) return undefined
  if (parentSession !== undefined && (typeof parentSession !== 'string' || parentSession.length === 0)) return undefined
  if (seedLength !== undefined && (!isCount(seedLength) || parentSession === undefined)) return undefined
  const out: Record<string, unknown> = { id, createdAt: jsonCopy(createdAt) }
  if (cwd !== undefined) out.cwd = cwd
  if (parentSession !== undefined) out.parentSession = parentSession
  if (seedLength !== undefined) out.seedLength = jsonCopy(seedLength)
  out.delegationDepth = jsonCopy(delegationDepth)
  for (const key of Object.keys(meta)) {
    if (SHAPE.has(key)) continue
    const value = meta[key]
    if (value === undefined) continue
    if (key === 'type' || key === 'version' || key === 'crc' || key === '__proto__') return undefined
    const copy = jsonCopy(value)
    if (copy === UNJUDGED) return undefined
    out[key] = copy
  }
  return out as SessionMeta
}

const HEADER_SHAPE = new Set(['type', 'version', ...SHAPE])

/**
 * The header `ParsedHeaderSchema` would return for `value`, a line 1 as `JSON.parse` gave it:
 * the same checks, the same object (known fields in the schema's order, then the others in the
 * line's). Undefined when it is not valid, or holds a `__proto__` key (zod's to judge): the caller
 * then asks zod, which decides and words the error. Every listing and load reads a header; zod
 * took a tenth of a listing's main thread.
 */
export function knownValidHeader(value: unknown): SessionHeader | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const h = value as Record<string, unknown>
  const { type, version, id, createdAt, cwd, parentSession, seedLength, delegationDepth } = h
  if (type !== 'session' || (version !== 0 && version !== 1)) return undefined
  if (typeof id !== 'string' || id.length === 0 || !isCount(createdAt) || !isCount(delegationDepth)) return undefined
  if (cwd !== undefined && (typeof cwd !== 'string' || !isAbsolute(cwd))) return undefined
  if (parentSession !== undefined && (typeof parentSession !== 'string' || parentSession.length === 0)) return undefined
  if (seedLength !== undefined && (!isCount(seedLength) || parentSession === undefined)) return undefined
  const out: Record<string, unknown> = { type, version, id, createdAt }
  if (cwd !== undefined) out.cwd = cwd
  if (parentSession !== undefined) out.parentSession = parentSession
  if (seedLength !== undefined) out.seedLength = seedLength
  out.delegationDepth = delegationDepth
  for (const key of Object.keys(h)) {
    if (HEADER_SHAPE.has(key)) continue
    if (key === '__proto__') return undefined
    out[key] = h[key]
  }
  return out as SessionHeader
}
