import { SessionPersistenceError } from '../errors.js'
import { asObject } from './as-object.js'

/**
 * The options object of one call (`load`, `list`): absent means none; anything that is not an
 * object (`null` included) is refused with `E_CONFIG` instead of failing on a property read.
 */
export function callOptions<T extends object>(value: T | undefined, call: string): Partial<T> {
  if (value === undefined) return {}
  if (asObject(value) === undefined) {
    throw new SessionPersistenceError('E_CONFIG', `the options of ${call} must be an object`)
  }
  return value
}
