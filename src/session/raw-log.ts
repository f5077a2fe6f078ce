import { SessionPersistenceError } from '../errors.js'
import type { RawSessionLog, RawSessionStream } from '../persistence.js'
import { envelopeProblem } from './envelope.js'
import { encodeSessionId } from './id-encoding.js'
import { MAX_HEADER_BYTES, parseHeaderLine } from './header-line.js'
import { MAX_LINE_BYTES } from './prepare-batch.js'
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
 * Checks a raw log as `load` would read it and returns its bytes, ready to be published. The
 * checks come in one order on every backend: the id (`E_INVALID_ID`; a log that is not an object
 * has none), `eventLines` an array (`E_CORRUPT`), the header line (`checkRawHeaderLine`) and
 * every event line (`checkRawEventLine`).
 */
export function rawLogToBytes(log: RawSessionLog): { header: SessionHeader; bytes: Buffer } {
  const header = checkRawLogHeader(log)
  const parts: string[] = [`${log.headerLine}\n`]
  log.eventLines.forEach((line: unknown, i) => {
    checkRawEventLine(log.id, line, i, header.version)
    parts.push(`${line as string}\n`)
  })
  return { header, bytes: Buffer.from(parts.join(''), 'utf8') }
}

/**
 * What `rawLogToBytes` checks before the event lines (the id, the header line, that `eventLines`
 * is an array): every backend's `importRaw` checks these first, with the same codes. Returns the header.
 */
export function checkRawLogHeader(log: RawSessionLog): SessionHeader {
  const id = rawLogId(log, 'a raw log must be an object { id, headerLine, eventLines }')
  encodeSessionId(id)
  if (!Array.isArray(log.eventLines)) throw rawRefusal('E_CORRUPT', id, 'eventLines is not an array')
  return checkRawHeaderLine(id, log.headerLine)
}

/**
 * What every backend's `importRawStream` checks before it takes the id: the id (`E_INVALID_ID`;
 * a stream that is not an object has none) and the header line (`checkRawHeaderLine`). Whether
 * its pages are a stream is checked when they are read (`rawStreamPages`). Returns the header.
 */
export function checkRawStreamHeader(log: RawSessionStream): SessionHeader {
  return checkRawHeaderLine(rawLogId(log, 'a raw stream must be an object { id, headerLine, eventPages }'), log.headerLine)
}

/** `log.id` (checked by `checkRawHeaderLine`), or `E_INVALID_ID` saying `what` when `log` is no object. */
function rawLogId(log: unknown, what: string): string {
  if (typeof log !== 'object' || log === null) throw new SessionPersistenceError('E_INVALID_ID', `${what}, got ${log === null ? 'null' : typeof log}: it has no session id`)
  return (log as { id: string }).id
}

const rawRefusal = (code: 'E_CORRUPT' | 'E_INVALID_EVENT' | 'E_INVALID_META' | 'E_SEQ_NOT_CONTIGUOUS', id: string, what: string) =>
  new SessionPersistenceError(code, `raw log of session '${id}': ${what}`, { sessionId: id })

/**
 * The raw header line of `id` (a valid id: `E_INVALID_ID`) checked as a load reads line 1: one line of well-formed text
 * (`E_CORRUPT`) of at most `MAX_HEADER_BYTES` with its newline, what every reader reads of line 1
 * (`E_INVALID_META` naming its size, as `create` refuses a meta that would make one), a valid
 * header of version 0 or 1 (`E_CORRUPT`, `E_FORMAT_UNSUPPORTED`) naming `id` (`E_INVALID_META`).
 */
export function checkRawHeaderLine(id: string, headerLine: unknown): SessionHeader {
  encodeSessionId(id)
  if (typeof headerLine !== 'string') throw rawRefusal('E_CORRUPT', id, 'the header line is not a string')
  if (headerLine.includes('\n')) throw rawRefusal('E_CORRUPT', id, 'the header line contains a newline')
  if (LONE_SURROGATE.test(headerLine)) throw rawRefusal('E_CORRUPT', id, 'the header line is not well-formed Unicode (lone surrogate)')
  const headerBytes = Buffer.from(`${headerLine}\n`)
  if (headerBytes.length > MAX_HEADER_BYTES) {
    throw rawRefusal('E_INVALID_META', id, `the header line is ${headerBytes.length} bytes (newline included), over the limit of ${MAX_HEADER_BYTES} bytes a header line may hold`)
  }
  const header = parseHeaderLine(headerBytes, 0, headerBytes.length - 1, true, { path: '', sessionId: undefined })
  if (header.id !== id) throw rawRefusal('E_INVALID_META', id, `the header names '${header.id}'`)
  return header
}

/**
 * Checks event line `i` of a raw log of `id` as `load` would read it: a string (`E_CORRUPT`) of
 * at most `MAX_LINE_BYTES` (`E_INVALID_EVENT` naming its size, as `append` refuses a longer
 * line), one line of well-formed text (`E_CORRUPT`), JSON (`E_CORRUPT`), a valid envelope (`E_INVALID_EVENT`), seq `i`
 * (`E_SEQ_NOT_CONTIGUOUS`); in version 1 its checksum, and no `crc` of its own (`E_CORRUPT`).
 * Returns its event.
 */
export function checkRawEventLine(id: string, line: unknown, i: number, version: FormatVersion): SessionEvent {
  const refuse = (code: 'E_CORRUPT' | 'E_INVALID_EVENT' | 'E_SEQ_NOT_CONTIGUOUS', what: string) =>
    new SessionPersistenceError(code, `raw log of session '${id}': ${what}`, { sessionId: id })
  if (typeof line !== 'string') throw refuse('E_CORRUPT', `event line ${i} is not a string`)
  // Longer than a line may be (§15.5): no reader would read it back (JSONL's calls it damage).
  // A UTF-8 byte takes at most 3 bytes per UTF-16 unit: short lines skip the exact count.
  if (line.length * 3 > MAX_LINE_BYTES && Buffer.byteLength(line) > MAX_LINE_BYTES) {
    throw refuse('E_INVALID_EVENT', `event line ${i} is ${Buffer.byteLength(line)} bytes; a line holds at most ${MAX_LINE_BYTES} (64 MiB)`)
  }
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

/** Whether the pages of each stream a backend opened were iterated (§15.5: a stream is read once). */
const READ_ONCE = new WeakMap<object, { iterated: boolean }>()

/**
 * The pages of a stream a backend's `openRawStream` opened, as pages that can be iterated once:
 * `pages()` is called at the first iteration (so nothing is opened before it, §15.5), and any
 * later iteration rejects at its first page with `E_CONFIG`, on every backend alike. (A
 * generator iterated again ends at once, which an import would take for a log of no events.)
 */
export function rawPagesOnce(id: string, pages: () => AsyncIterator<readonly string[]>): AsyncIterable<readonly string[]> {
  const iterable: AsyncIterable<readonly string[]> = {
    [Symbol.asyncIterator]: () => (claimRawPages(iterable) ? pages() : readAlready(id)),
  }
  READ_ONCE.set(iterable, { iterated: false })
  return iterable
}

/**
 * Claims the pages of a stream for their one reading: false when they are the pages of a
 * backend's stream (`rawPagesOnce`) read already. A caller's own iterable is always true: what
 * it does when iterated again is its own.
 */
export function claimRawPages(pages: unknown): boolean {
  const state = READ_ONCE.get(pages as object)
  if (!state) return true
  if (state.iterated) return false
  state.iterated = true
  return true
}

async function* readAlready(id: string): AsyncGenerator<readonly string[]> {
  throw new SessionPersistenceError(
    'E_CONFIG',
    `the raw stream of session '${id}' was read already: its pages can be iterated once; open the session again with openRawStream`,
    { sessionId: id },
  )
}
