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
 */
export function plainJsonProblem(value: unknown, path: string, ancestors: object[] = [], maxDepth = Infinity): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined
    case 'number':
      return Number.isFinite(value) ? undefined : `${path} is ${describe(value)}`
    case 'object':
      break
    default:
      return `${path} is ${describe(value)}`
  }
  if (value === null) return undefined
  if (ancestors.includes(value)) return `${path} is a circular reference`
  if (ancestors.length >= maxDepth) return `${path} is nested more than ${maxDepth} levels deep`
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return `${path} is ${describe(value)}`
    ancestors.push(value)
    for (let i = 0; i < value.length; i++) {
      const problem = plainJsonProblem(value[i], `${path}[${i}]`, ancestors, maxDepth)
      if (problem) return problem
    }
    ancestors.pop()
    return undefined
  }
  if (!isPlainObject(value)) return `${path} is ${describe(value)}`
  ancestors.push(value)
  for (const key of Object.keys(value)) {
    const child = (value as Record<string, unknown>)[key]
    if (child === undefined) continue
    const problem = plainJsonProblem(child, pathKey(path, key), ancestors, maxDepth)
    if (problem) return problem
  }
  ancestors.pop()
  return undefined
}
