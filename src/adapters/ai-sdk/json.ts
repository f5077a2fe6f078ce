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
 * So is a cycle: the copy refers back to its own copy of the object where the value did, and the
 * backend names it a circular reference. The walk keeps a stack of its own (one that called
 * itself once a level threw a RangeError on a cycle or on nesting some thousand levels deep, out
 * of `turn()` and `end()`), so nesting too deep to write is the backend's `E_NOT_JSON` as well.
 */
export function toJson(value: unknown): JsonValue {
  const root = shallow(value)
  if (root.walk === undefined) return root.json
  // The containers being copied, each with its copy: a value met again inside itself is a cycle.
  const copies = new Map<object, JsonObject | JsonValue[]>([[root.walk.source, root.walk.copy]])
  const stack: Walk[] = [root.walk]
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    if (top.next === top.length) {
      stack.pop()
      copies.delete(top.source)
      continue
    }
    const at = top.next++
    const key = top.keys === undefined ? at : top.keys[at]!
    if (top.keys === undefined && !(at in top.source)) continue // a hole stays a hole, as `map` left it
    const child = (top.source as Record<string | number, unknown>)[key]
    if (child === undefined && top.keys !== undefined) continue
    let json: JsonValue
    let walk: Walk | undefined
    if (typeof child !== 'object' || child === null) json = primitive(child)
    else {
      const again = copies.get(child)
      if (again !== undefined) json = again
      else ({ json, walk } = shallow(child))
    }
    if (typeof key === 'number') (top.copy as JsonValue[])[key] = json
    else set(top.copy as JsonObject, key, json)
    if (walk) {
      copies.set(walk.source, walk.copy)
      stack.push(walk)
    }
  }
  return root.json
}

/** A plain object or array being copied: its keys (an array's: undefined, its indexes) and the next one's place. */
interface Walk {
  readonly source: object
  readonly copy: JsonObject | JsonValue[]
  readonly keys: readonly string[] | undefined
  readonly length: number
  next: number
}

/** `value` as JSON, its children still to copy when it is a plain object or array (`walk`). */
function shallow(value: unknown): { json: JsonValue; walk: Walk | undefined } {
  if (value instanceof Uint8Array) return leaf(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64'))
  if (value instanceof ArrayBuffer) return leaf(Buffer.from(value).toString('base64'))
  if (value instanceof URL) return leaf(value.href)
  if (value instanceof Date) return leaf(Number.isNaN(value.getTime()) ? null : value.toISOString()) // as JSON.stringify does
  if (Array.isArray(value)) {
    // An array of another class is kept as it is, for the backend to name (a copy by `map` was of that class too).
    if (Object.getPrototypeOf(value) !== Array.prototype) return leaf(value as JsonValue)
    const copy: JsonValue[] = new Array<JsonValue>(value.length)
    return { json: copy, walk: { source: value, copy, keys: undefined, length: value.length, next: 0 } }
  }
  const obj = asObject(value)
  if (obj && (Object.getPrototypeOf(obj) === Object.prototype || Object.getPrototypeOf(obj) === null)) {
    const copy: JsonObject = {}
    const keys = Object.keys(obj)
    return { json: copy, walk: { source: obj, copy, keys, length: keys.length, next: 0 } }
  }
  return leaf(primitive(value))
}

// -0 becomes 0, what the log holds after JSON.stringify: memory and disk agree. Any other value
// that is no object is kept as it is (a BigInt, a function: refused by the backend).
const primitive = (value: unknown): JsonValue => (Object.is(value, -0) ? 0 : (value as JsonValue))

const leaf = (json: JsonValue): { json: JsonValue; walk: undefined } => ({ json, walk: undefined })

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
