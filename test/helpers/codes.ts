// Imports the storage core's errors only (not the package index), so storage tests do not depend
// on the plugin or the CLI compiling.
import { isSessionPersistenceError } from '../../src/errors.js'

/** The error a promise rejects with; fails the test if it resolves. */
export async function rejection(p: Promise<unknown>): Promise<Error & { code: string }> {
  try {
    await p
  } catch (err) {
    return err as Error & { code: string }
  }
  throw new Error('expected a rejection')
}

/** The error a function throws; fails the test if it returns. */
export function thrown(f: () => unknown): Error & { code?: string } {
  try {
    f()
  } catch (err) {
    return err as Error & { code?: string }
  }
  throw new Error('expected a throw')
}

/**
 * The package error code a promise rejects with (or a function throws or rejects with),
 * 'resolved', or a description of a foreign error.
 */
export async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p)
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : `foreign: ${String(err)}`
  }
}
