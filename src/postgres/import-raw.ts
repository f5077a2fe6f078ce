import type { RawSessionLog, RawSessionStream } from '../persistence.js'
import { checkRawEventLine, LONE_SURROGATE } from '../session/raw-log.js'
import { SessionPersistenceError } from '../errors.js'
import { kindOf } from './event-kinds.js'
import type { FormatVersion } from '../session/line-codec.js'
import type { SessionHeader } from '../session/schema.js'
import { parseStoredHeader } from './read-session.js'

/** `E_CORRUPT` for a line (or header) that has no UTF-8 form: the driver would store U+FFFD, not the line given. */
function assertUnicode(line: string, what: string, id: string, path: string): void {
  if (LONE_SURROGATE.test(line)) {
    throw new SessionPersistenceError('E_CORRUPT', `${what} is not well-formed Unicode (lone surrogate)`, { sessionId: id, path })
  }
}

/**
 * Checks a raw header line as `load` reads it (its id must be `id`, a sealed header's checksum
 * must match); returns the header: its createdAt, and the format version its event lines are in.
 */
export function checkRawHeader(id: string, headerLine: unknown, path: string): SessionHeader {
  if (typeof headerLine !== 'string') {
    throw new SessionPersistenceError('E_INVALID_EVENT', 'a raw log needs a header line', { sessionId: id, path })
  }
  if (headerLine.includes('\n')) {
    throw new SessionPersistenceError('E_CORRUPT', 'the header line holds a newline', { sessionId: id, path })
  }
  assertUnicode(headerLine, 'the header line', id, path)
  return parseStoredHeader(headerLine, id, path)
}

/**
 * Checks raw event line `i` of a log of `version` as every backend's import checks it
 * (`checkRawEventLine`: nothing is stored that could not be loaded back; the line is stored as
 * given, its checksum with it) and returns its kind (event-kinds.ts).
 */
export function checkRawLine(line: unknown, i: number, id: string, _path: string, version: FormatVersion): number {
  return kindOf(checkRawEventLine(id, line, i, version).type)
}

/** Lines per page of an `importRaw`: a big log goes in several INSERTs of one transaction. */
const CHUNK = 5_000

/**
 * Checks a raw log as `load` would read it (header id = `log.id`, valid lines of the header's
 * format version, seqs from 0), so nothing is stored that could not be loaded back. Returns the
 * kind of each line and the log as a stream of pages of its lines (copied now): `importRaw` is
 * `importRawStream` of that stream with those kinds.
 */
export function checkRawLog(log: RawSessionLog, path: string): { stream: RawSessionStream; kinds: number[] } {
  if (typeof log !== 'object' || log === null || typeof log.headerLine !== 'string' || !Array.isArray(log.eventLines)) {
    throw new SessionPersistenceError('E_INVALID_EVENT', 'importRaw expects { id, headerLine, eventLines }', { path })
  }
  const { id, headerLine } = log
  const lines = [...log.eventLines]
  const { version } = checkRawHeader(id, headerLine, path)
  const kinds = lines.map((line, i) => checkRawLine(line, i, id, path, version))
  const eventPages = (async function* () {
    for (let from = 0; from < lines.length; from += CHUNK) yield lines.slice(from, from + CHUNK)
  })()
  return { stream: { id, headerLine, eventPages }, kinds }
}
