/** A plain JSON object seen without a schema (event data read by repair, history and the CLI). */
export type JsonObject = Record<string, unknown>

/** `v` as an object when it is a non-null, non-array object; otherwise undefined. */
export function asObject(v: unknown): JsonObject | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject) : undefined
}
