import type { RawSessionLog, RawSessionStream } from '../persistence.js'
import { checkRawEventLine, checkRawLogHeader } from '../session/raw-log.js'
import { kindOf } from './event-kinds.js'
import type { FormatVersion } from '../session/line-codec.js'

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
  // The id, the header line and the array first, with every backend's codes (raw-log.ts).
  const { version } = checkRawLogHeader(log)
  const { id, headerLine } = log
  const lines = [...log.eventLines]
  const kinds = lines.map((line, i) => checkRawLine(line, i, id, path, version))
  const eventPages = (async function* () {
    for (let from = 0; from < lines.length; from += CHUNK) yield lines.slice(from, from + CHUNK)
  })()
  return { stream: { id, headerLine, eventPages }, kinds }
}
