import { SessionPersistenceError } from '../errors.js'
import { asObject } from './as-object.js'

/** `{ dryRun? }` of migrate and truncateAtDamage: `E_CONFIG` for anything else. */
export function parseMaintenanceOptions(options: unknown, call: string): { dryRun: boolean } {
  if (options === undefined) return { dryRun: false }
  const o = asObject(options)
  if (!o) throw new SessionPersistenceError('E_CONFIG', `the options of ${call} must be an object`)
  for (const key of Object.keys(o)) {
    if (key !== 'dryRun') throw new SessionPersistenceError('E_CONFIG', `unknown option of ${call}: ${key}`)
  }
  if (o.dryRun !== undefined && typeof o.dryRun !== 'boolean') throw new SessionPersistenceError('E_CONFIG', `${call}: dryRun must be a boolean`)
  return { dryRun: o.dryRun === true }
}

/**
 * `{ pattern, replacement?, dryRun? }` of redact: the pattern as a global RegExp (a string is
 * a regular expression's source, compiled with the `u` flag; a RegExp keeps its own flags but
 * `y`, sticky, which would stop at the first place that is no match),
 * `[REDACTED]` by default. A pattern that matches the empty
 * string would insert the replacement everywhere: `E_CONFIG`.
 */
export function parseRedactOptions(options: unknown): { pattern: RegExp; replacement: string; dryRun: boolean } {
  const o = asObject(options)
  if (!o) throw new SessionPersistenceError('E_CONFIG', 'the options of redact must be an object { pattern, replacement?, dryRun? }')
  for (const key of Object.keys(o)) {
    if (key !== 'pattern' && key !== 'replacement' && key !== 'dryRun') throw new SessionPersistenceError('E_CONFIG', `unknown option of redact: ${key}`)
  }
  let pattern: RegExp
  const given = o.pattern as unknown
  try {
    // Always global, never sticky: a sticky pattern matches only where the last match ended (on
    // 'Secret one\nsecret two', `/secret/y` matched nothing), and a redaction replaces every match.
    if (given instanceof RegExp) pattern = new RegExp(given.source, `${given.flags.replace(/[gy]/g, '')}g`)
    // A string is compiled in Unicode mode: `\p{…}` classes mean what they say (without `u`,
    // `\p{Nd}` is a literal `p{Nd}`, and a card number stayed unredacted with exit 0), `.`
    // takes a whole character (never half of a surrogate pair), and a pattern that is not valid
    // in that mode fails here instead of silently matching something else.
    else if (typeof given === 'string' && given.length > 0) pattern = new RegExp(given, 'gu')
    else throw new Error('pattern must be a non-empty string or a RegExp')
  } catch (err) {
    throw new SessionPersistenceError('E_CONFIG', `redact: invalid pattern: ${(err as Error).message}`, { cause: err })
  }
  if (pattern.test('')) throw new SessionPersistenceError('E_CONFIG', `redact: the pattern ${pattern} matches the empty string`)
  pattern.lastIndex = 0
  const replacement = o.replacement ?? '[REDACTED]'
  if (typeof replacement !== 'string') throw new SessionPersistenceError('E_CONFIG', 'redact: replacement must be a string')
  if (o.dryRun !== undefined && typeof o.dryRun !== 'boolean') throw new SessionPersistenceError('E_CONFIG', 'redact: dryRun must be a boolean')
  return { pattern, replacement, dryRun: o.dryRun === true }
}
