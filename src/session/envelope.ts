// Hot-path twin of SessionEventSchema (schema.ts): zod on every line of a large load costs more
// than the load itself. test/envelope-matches-schema.test.ts proves both agree.

const RESERVED = new Set(['seq', 'type', 'time', 'ignorable'])

/** Why `value` is not a valid event envelope, or undefined when it is one. `data` is not inspected. */
export function envelopeProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object'
  const e = value as Record<string, unknown>
  const seq = e.seq
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
    return 'seq is not a non-negative safe integer'
  }
  const type = e.type
  if (typeof type !== 'string' || type.length === 0) return 'type is not a non-empty string'
  const time = e.time
  if (typeof time !== 'number' || !Number.isFinite(time)) return 'time is not a finite number'
  if (e.ignorable !== undefined && e.ignorable !== true) return 'ignorable is present but not true'
  return undefined
}

export function isEnvelopeKey(key: string): boolean {
  return RESERVED.has(key)
}
