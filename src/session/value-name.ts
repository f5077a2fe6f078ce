/**
 * A value named in an error message without serializing it (a BigInt or a cycle would make
 * `JSON.stringify` throw): a string quoted, a number, boolean, null or undefined as written,
 * anything else by its kind.
 */
export function valueName(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value)
  if (typeof value === 'bigint') return `${value}n`
  try {
    return Array.isArray(value) ? 'an array' : kindName(value)
  } catch {
    return `${kindName(value)}` // a revoked Proxy: Array.isArray throws on it
  }
}

/** `String(value)`, or what it is when even that throws (a revoked Proxy, a throwing `toString`). */
export function printable(value: unknown): string {
  try {
    return String(value)
  } catch {
    return valueName(value)
  }
}

function kindName(value: unknown): string {
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}
