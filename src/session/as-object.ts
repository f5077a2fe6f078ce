/** A plain JSON object seen without a schema (event data read by repair, history and the CLI). */
export type JsonObject = Record<string, unknown>

/** `v` as an object when it is a non-null, non-array object; otherwise undefined. */
export function asObject(v: unknown): JsonObject | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject) : undefined
}

/**
 * `o[key]` as it reads now; undefined when `o` is no object or reading the field throws (a
 * throwing getter, a revoked Proxy: what a host may hand over as an event).
 */
export function readField(o: unknown, key: string): unknown {
  if (typeof o !== 'object' || o === null) return undefined
  try {
    return (o as Record<string, unknown>)[key]
  } catch {
    return undefined
  }
}

/**
 * `o[key] = value` as an own, enumerable property, also for the key `__proto__`: plain assignment
 * of that key (which `JSON.parse` makes an own property) changes the object's prototype instead,
 * and the field vanishes from a copy and from its JSON.
 */
export function setField(o: JsonObject, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true })
  else o[key] = value
}
