import { SessionPersistenceError } from '../errors.js'
import type { RawSessionLog, RawSessionStream } from '../persistence.js'
import { envelopeProblem } from './envelope.js'
import { encodeSessionId } from './id-encoding.js'
import { parseHeaderLine } from './header-line.js'
import type { SessionEvent, SessionHeader } from './schema.js'
import { type FormatVersion, unsealString } from './line-codec.js'

// In a `u` regex a surrogate pair is one code point, so this matches lone surrogates only:
// such a string has no UTF-8 form, so it could not come back byte for byte.
export const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/**
 * The exact lines of a log read as `[0, end)`: the header line and one line per valid event,
 * without their `\n`. `bytes` holds exactly those lines, each ending with `\n`.
 */
export function rawLogFromBytes(id: string, bytes: Buffer): RawSessionLog {
  const lines = bytes.toString('utf8').split('\n')
  lines.pop() // the empty string after the last `\n`
  const [headerLine = '', ...eventLines] = lines
  return { id, headerLine, eventLines }
}

/**
 * Checks a raw log as `load` would read it and returns its bytes, ready to be published:
 * the header must be a valid header of version 0 or 1 (`E_CORRUPT`, `E_FORMAT_UNSUPPORTED`) naming
 * `log.id` (`E_INVALID_META`); every event line must be one line of JSON (`E_CORRUPT`) with a
 * valid envelope (`E_INVALID_EVENT`) and seq equal to its index (`E_SEQ_NOT_CONTIGUOUS`).
 */
export function rawLogToBytes(log: RawSessionLog): { header: SessionHeader; bytes: Buffer } {
  if (typeof log !== 'object' || log === null) {
    throw new SessionPersistenceError('E_INVALID_META', 'a raw log must be an object { id, headerLine, eventLines }')
  }
  const { id } = log
  encodeSessionId(id)
  const refuse = (code: 'E_CORRUPT' | 'E_INVALID_EVENT' | 'E_SEQ_NOT_CONTIGUOUS', what: string) =>
    new SessionPersistenceError(code, `raw log of session '${id}': ${what}`, { sessionId: id })
  const lineProblem = (line: unknown): string | undefined => {
    if (typeof line !== 'string') return 'is not a string'
    if (line.includes('\n')) return 'contains a newline'
    if (LONE_SURROGATE.test(line)) return 'is not well-formed Unicode (lone surrogate)'
    return undefined
  }
  const headerProblem = lineProblem(log.headerLine)
  if (headerProblem) throw refuse('E_CORRUPT', `the header line ${headerProblem}`)
  if (!Array.isArray(log.eventLines)) throw refuse('E_CORRUPT', 'eventLines is not an array')
  const headerBytes = Buffer.from(`${log.headerLine}\n`)
  const header = parseHeaderLine(headerBytes, 0, headerBytes.length - 1, true, { path: '', sessionId: undefined })
  if (header.id !== id) {
    throw new SessionPersistenceError('E_INVALID_META', `raw log of session '${id}': the header names '${header.id}'`, {
      sessionId: id,
    })
  }
  const parts: string[] = [`${log.headerLine}\n`]
  log.eventLines.forEach((line: unknown, i) => {
    checkRawEventLine(id, line, i, header.version)
    parts.push(`${line as string}\n`)
  })
  return { header, bytes: Buffer.from(parts.join(''), 'utf8') }
}

/** The raw header line of `id` checked as `rawLogToBytes` checks it; its header. */
export function checkRawHeaderLine(id: string, headerLine: unknown): SessionHeader {
  return rawLogToBytes({ id, headerLine: headerLine as string, eventLines: [] }).header
}

/**
 * Checks event line `i` of a raw log of `id` as `load` would read it: one line of well-formed
 * text (`E_CORRUPT`), JSON (`E_CORRUPT`), a valid envelope (`E_INVALID_EVENT`), seq `i`
 * (`E_SEQ_NOT_CONTIGUOUS`); in version 1 its checksum, and no `crc` of its own (`E_CORRUPT`).
 * Returns its event.
 */
export function checkRawEventLine(id: string, line: unknown, i: number, version: FormatVersion): SessionEvent {
  const refuse = (code: 'E_CORRUPT' | 'E_INVALID_EVENT' | 'E_SEQ_NOT_CONTIGUOUS', what: string) =>
    new SessionPersistenceError(code, `raw log of session '${id}': ${what}`, { sessionId: id })
  if (typeof line !== 'string') throw refuse('E_CORRUPT', `event line ${i} is not a string`)
  if (line.includes('\n')) throw refuse('E_CORRUPT', `event line ${i} contains a newline`)
  if (LONE_SURROGATE.test(line)) throw refuse('E_CORRUPT', `event line ${i} is not well-formed Unicode (lone surrogate)`)
  const text = version === 1 ? unsealString(line) : line
  if (text === undefined) throw refuse('E_CORRUPT', `event line ${i}: checksum mismatch`)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw refuse('E_CORRUPT', `event line ${i} is not JSON: ${(err as Error).message}`)
  }
  const envelope = envelopeProblem(value)
  if (envelope) throw refuse('E_INVALID_EVENT', `event line ${i}: ${envelope}`)
  // A sealed line whose JSON holds a crc of its own is a defect to every reader (§16: reserved).
  if (version === 1 && (value as { crc?: unknown }).crc !== undefined) throw refuse('E_CORRUPT', `event line ${i}: a reserved crc field inside the line`)
  const seq = (value as { seq: number }).seq
  if (seq !== i) throw refuse('E_SEQ_NOT_CONTIGUOUS', `event line ${i} has seq ${seq}`)
  return value as SessionEvent
}

/**
 * The pages of a streamed raw log, checked as every backend's `importRawStream` checks them: a
 * stream that is not `{ id, headerLine, eventPages }` with iterable pages is `E_INVALID_META`,
 * a page that is not an array `E_CORRUPT`. Empty pages are skipped. (The lines themselves are
 * checked by `checkRawEventLine`.)
 */
export function rawStreamPages(log: RawSessionStream): AsyncGenerator<readonly unknown[]> {
  // The stream's shape is checked now, its pages as they come.
  if (typeof log !== 'object' || log === null || typeof log.eventPages?.[Symbol.asyncIterator] !== 'function') {
    throw new SessionPersistenceError('E_INVALID_META', 'a raw stream must be an object { id, headerLine, eventPages }')
  }
  return (async function* () {
    for await (const page of log.eventPages as AsyncIterable<unknown>) {
      if (!Array.isArray(page)) throw new SessionPersistenceError('E_CORRUPT', `raw log of session '${log.id}': a page is not an array of lines`, { sessionId: log.id })
      if (page.length > 0) yield page
    }
  })()
}
