import type { Logger } from './schema.js'

/** The logger used when none is configured: one prefixed line on stderr per warning. */
export function defaultLogger(prefix = 'session-persistence-jsonl'): Logger {
  return { warn: (message) => console.warn(`${prefix}: ${message}`) }
}
