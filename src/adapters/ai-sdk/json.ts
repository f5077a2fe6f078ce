import { asObject } from '../../session/as-object.js'
import type { JsonValue } from '../../session/schema.js'

export type JsonObject = { [key: string]: JsonValue }

/**
 * An AI SDK value as plain JSON, the way the log can store it. Binary data (`Uint8Array`,
 * `Buffer`, `ArrayBuffer`), which image and file parts may hold, becomes a base64 string and a
 * `URL` its `href`: the AI SDK accepts both forms back. A `Date` becomes its ISO string, as in
 * `JSON.stringify`; `undefined` properties are left out.
 * Anything else that is not JSON (a function, a BigInt, a class instance) is kept as it is, so
 * the backend refuses it with `E_NOT_JSON` naming where it was, instead of being silently lost.
 */
export function toJson(value: unknown): JsonValue {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64')
  if (value instanceof ArrayBuffer) return Buffer.from(value).toString('base64')
  if (value instanceof URL) return value.href
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString() // as JSON.stringify does
  if (Array.isArray(value)) return value.map((v) => toJson(v))
  if (Object.is(value, -0)) return 0 // what the log holds after JSON.stringify; memory and disk agree
  const obj = asObject(value)
  if (obj && (Object.getPrototypeOf(obj) === Object.prototype || Object.getPrototypeOf(obj) === null)) {
    const out: JsonObject = {}
    for (const [k, v] of Object.entries(obj)) if (v !== undefined) set(out, k, toJson(v))
    return out
  }
  return value as JsonValue
}

// A key named `__proto__` must stay an own property, never set the object's prototype.
const set = (target: JsonObject, key: string, value: JsonValue) =>
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })

/** The JSON value of `value`, or `undefined` when it is absent. */
export const toJsonOpt = (value: unknown): JsonValue | undefined => (value === undefined ? undefined : toJson(value))

/** Copies `source` without the keys listed (the ones a mapping renames or rebuilds). */
export function without(source: Record<string, unknown>, keys: readonly string[]): JsonObject {
  const out: JsonObject = {}
  for (const [k, v] of Object.entries(source)) if (!keys.includes(k) && v !== undefined) set(out, k, toJson(v))
  return out
}

/**
 * Tool arguments as the AI SDK wants them: parsed. A host that stored a call's arguments as a
 * JSON string (the wire form of several providers) gets the object it encodes back; any other
 * value is handed over as it is.
 */
export function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string') return args === undefined ? {} : args
  try {
    const parsed: unknown = JSON.parse(args)
    return asObject(parsed) ? parsed : args
  } catch {
    return args
  }
}
