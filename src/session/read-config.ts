import type { z } from 'zod'
import { SessionPersistenceError } from '../errors.js'
import { printable } from './value-name.js'

/**
 * `schema.safeParse(value)` at a public edge, where a value that cannot even be read (a revoked
 * Proxy, a getter or trap that throws) is refused like any other bad configuration: `E_CONFIG`
 * naming `what`, the throw as its cause, never a bare TypeError (§9).
 */
export function safeParseConfig<T extends z.ZodType>(schema: T, value: unknown, what: string): z.ZodSafeParseResult<z.output<T>> {
  try {
    const result = schema.safeParse(value) as z.ZodSafeParseResult<z.output<T>>
    // zod words its issues when `error` is first read, which reads the value again.
    if (!result.success) void result.error.issues.map((issue) => issue.message)
    return result
  } catch (err) {
    throw new SessionPersistenceError('E_CONFIG', `${what} cannot be read (${printable(err)})`, { cause: err })
  }
}
