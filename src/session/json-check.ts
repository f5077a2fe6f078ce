const IDENTIFIER = /^[A-Za-z_$][\w$]*$/

/** Appends a property key to a path the way JavaScript would write it: `a.b`, `a["x y"]`. */
export function pathKey(base: string, key: string): string {
  if (IDENTIFIER.test(key)) return base === '' ? key : `${base}.${key}`
  return `${base}[${JSON.stringify(key)}]`
}

function describe(value: unknown): string {
  switch (typeof value) {
    case 'bigint':
      return 'a BigInt'
    case 'symbol':
      return 'a Symbol'
    case 'function':
      return 'a function'
    case 'undefined':
      return 'undefined'
    case 'number':
      return Number.isNaN(value) ? 'NaN' : String(value) // Infinity, -Infinity
    default: {
      const ctor = (value as { constructor?: { name?: unknown } }).constructor
      const name = typeof ctor?.name === 'string' && ctor.name !== '' ? ctor.name : 'non-plain object'
      return /^[AEIO]/.test(name) ? `an ${name}` : `a ${name}`
    }
  }
}

/** Whether a value is an object literal's kind of object (its prototype `Object.prototype` or none). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const FAST_MAX_DEPTH = 64

/**
 * The hot-path check: true when `value` is plain JSON. Allocates nothing; gives up (false) past
 * FAST_MAX_DEPTH, which every cycle reaches, so the precise walk below handles cycles and
 * produces the message. Inherited enumerable keys (a polluted prototype) also make it give up.
 */
export function isPlainJson(value: unknown, depth = 0): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(value)
    case 'object':
      break
    default:
      return false
  }
  if (value === null) return true
  if (depth > FAST_MAX_DEPTH) return false
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return false
    for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], depth + 1)) return false
    return true
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return false
  for (const key in value) {
    const child = (value as Record<string, unknown>)[key]
    if (child !== undefined && !isPlainJson(child, depth + 1)) return false
  }
  return true
}

/**
 * Finds the first place where `value` is not plain JSON: null, booleans, finite numbers,
 * strings, arrays and plain objects, recursively, without cycles. Object properties whose value
 * is `undefined` are allowed (JSON.stringify omits them); `undefined` inside an array is not
 * (it would silently become null). Returns e.g. `data.content[2] is a BigInt`, or undefined.
 * `ancestors` are the containers above `value` (they count towards `maxDepth`).
 *
 * It keeps a stack of its own, depth first in the order JSON.stringify writes: a walk that called
 * itself once a level ran out of call stack on a value nested some thousand levels deep (a
 * RangeError where the caller wanted the problem; a cycle is found here however deep). Whether
 * plain JSON that deep can be written is JSON.stringify's to say, where the append calls it.
 * The path is built only for the problem found.
 */
export function plainJsonProblem(value: unknown, path: string, ancestors: readonly object[] = [], maxDepth = Infinity): string | undefined {
  const onPath = new Set<object>(ancestors)
  const frames: Frame[] = []
  const here = (): string => {
    let p = path
    for (const f of frames) p = f.keys === undefined ? `${p}[${f.next - 1}]` : pathKey(p, f.keys[f.next - 1]!)
    return p
  }
  let item: unknown = value
  for (;;) {
    const problem = itemProblem(item, onPath, ancestors.length + frames.length, maxDepth)
    if (problem !== undefined) return `${here()} is ${problem}`
    if (typeof item === 'object' && item !== null) {
      onPath.add(item)
      const keys = Array.isArray(item) ? undefined : Object.keys(item)
      frames.push({ container: item as Record<string, unknown>, keys, length: keys?.length ?? (item as unknown[]).length, next: 0 })
    }
    // The next value to check: the next child of the innermost container that has one left.
    let found = false
    while (!found && frames.length > 0) {
      const f = frames[frames.length - 1]!
      if (f.next === f.length) {
        frames.pop()
        onPath.delete(f.container)
        continue
      }
      const child = f.container[f.keys === undefined ? f.next : f.keys[f.next]!]
      f.next++
      if (f.keys === undefined || child !== undefined) {
        item = child
        found = true
      }
    }
    if (!found) return undefined
  }
}

/** A container being walked: its keys (an array's: undefined, its indexes) and the next one's place. */
interface Frame {
  readonly container: Record<string | number, unknown>
  readonly keys: readonly string[] | undefined
  readonly length: number
  next: number
}

/** Why `value` itself is not plain JSON (its children aside), or undefined. */
function itemProblem(value: unknown, onPath: ReadonlySet<object>, depth: number, maxDepth: number): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined
    case 'number':
      return Number.isFinite(value) ? undefined : describe(value)
    case 'object':
      break
    default:
      return describe(value)
  }
  if (value === null) return undefined
  if (onPath.has(value)) return 'a circular reference'
  if (depth >= maxDepth) return `nested more than ${maxDepth} levels deep`
  if (Array.isArray(value)) return Object.getPrototypeOf(value) === Array.prototype ? undefined : describe(value)
  return isPlainObject(value) ? undefined : describe(value)
}

/**
 * A copy of `value`, which `plainJsonProblem` accepts, as the log will hold it: through
 * JSON.stringify and JSON.parse (`undefined` properties left out, -0 as 0), so it reaches as deep
 * as the append's own JSON.stringify does (structuredClone's walk gave out at half that depth,
 * with a RangeError). `undefined` when `value` is nested deeper than JSON.stringify can write on
 * this stack: the append would refuse it `E_NOT_JSON`.
 */
export function plainJsonCopy<T>(value: T): T | undefined {
  try {
    return JSON.parse(JSON.stringify(value)) as T
  } catch (error) {
    if (error instanceof RangeError) return undefined
    throw error
  }
}
