import { createHash, randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { encodeSessionId } from '../session/id-encoding.js'

export const NO_CWD_BUCKET = '_no-cwd'
export const LOG_SUFFIX = '.jsonl'
export const LOCKS_DIR = '.locks'
export const TMP_PREFIX = '.tmp-'

/** `cwd-<first 12 hex digits of sha256(cwd)>`, or `_no-cwd` (docs/contract.md §3.1). */
export function bucketName(cwd: string | undefined): string {
  if (cwd === undefined) return NO_CWD_BUCKET
  return `cwd-${createHash('sha256').update(cwd, 'utf8').digest('hex').slice(0, 12)}`
}

export function logFileName(id: string): string {
  return `${encodeSessionId(id)}${LOG_SUFFIX}`
}

export function logPath(root: string, id: string, cwd: string | undefined): string {
  return join(root, bucketName(cwd), logFileName(id))
}

// 96 random bits per process and a counter: as unique as a fresh random name per call (a
// crash's leftovers and other processes never collide), without spending ~15 µs in the CSPRNG
// on each of the three names a new session needs. Drawn at first use, not at import, so that a
// startup snapshot holding this module never hands one nonce to many processes.
let nonce: string | undefined
let counter = 0

/** A token no other call, process or earlier run uses: names temporary files and writer locks. */
export function uniqueToken(): string {
  nonce ??= randomBytes(12).toString('hex')
  counter++
  return `${nonce}${counter.toString(36)}`
}

/** A fresh temporary name; unique so a name left behind by a crash never blocks anything. */
export function tmpName(): string {
  return `${TMP_PREFIX}${uniqueToken()}`
}
