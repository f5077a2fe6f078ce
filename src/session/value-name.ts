/**
 * A value named in an error message without serializing it (a BigInt or a cycle would make
 * `JSON.stringify` throw): a string quoted, a number, boolean, null or undefined as written,
 * anything else by its kind.
 */
export function valueName(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value)
  if (typeof value === 'bigint') return `${value}n`
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`
}
