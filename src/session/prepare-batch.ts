import { SessionPersistenceError } from '../errors.js'
import { envelopeProblem, isEnvelopeKey } from './envelope.js'
import { isPlainJson, pathKey, plainJsonProblem } from './json-check.js'
import { CRC_FIELD_BYTES, type FormatVersion, sealBatch, sealLine } from './line-codec.js'
import type { SessionEvent } from './schema.js'

/** The longest line an event may serialize to, without its `\n` (§15.5). */
export const MAX_LINE_BYTES = 64 * 1024 * 1024

export interface PreparedBatch {
  firstSeq: number
  count: number
  /** The batch's lines, serialized when `append` was called (later mutation changes nothing). */
  bytes: Buffer
}

/**
 * Validates and serializes a batch (docs/contract.md §4.3): envelope (`E_INVALID_EVENT`), plain JSON
 * content (`E_NOT_JSON`, naming type, seq and path) and contiguity inside the batch
 * (`E_SEQ_NOT_CONTIGUOUS`). Whether the first seq continues the log is checked at write time.
 */
export function prepareBatch(sessionId: string, events: readonly SessionEvent[], version: FormatVersion = 0): PreparedBatch {
  // Version 1 seals the batch's bytes in one pass (a checksum over each line's bytes, no string a line).
  const { firstSeq, count, text } = serializeLines(sessionId, events, version === 1 ? CRC_FIELD_BYTES : 0, (json) => json)
  const plain = Buffer.from(text, 'utf8')
  return { firstSeq, count, bytes: version === 1 ? sealBatch(plain, count) : plain }
}

/** What `prepareBatch` checks and writes, as text: each event's line followed by `\n`. */
export function serializeEvents(sessionId: string, events: readonly SessionEvent[], version: FormatVersion = 0): { firstSeq: number; count: number; text: string } {
  return serializeLines(sessionId, events, 0, (json) => sealLine(json, version))
}

/**
 * Checks a batch and joins its lines, each `line(JSON.stringify(event))` and `\n`; the size
 * limit counts `extra` bytes more a line (a checksum added afterwards).
 */
function serializeLines(
  sessionId: string,
  events: readonly SessionEvent[],
  extra: number,
  line: (json: string) => string,
): { firstSeq: number; count: number; text: string } {
  if (!Array.isArray(events)) {
    throw new SessionPersistenceError('E_INVALID_EVENT', 'append expects an array of events', { sessionId })
  }
  let text = ''
  let firstSeq = 0
  for (let i = 0; i < events.length; i++) {
    const event: unknown = events[i]
    const envelope = envelopeProblem(event)
    if (envelope) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `event ${i} of the batch: ${envelope}`, { sessionId })
    }
    const e = event as SessionEvent
    // `crc` is the checksum's name (§16): reserved in every version, so no log can hold both.
    if (e.crc !== undefined) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `event ${i} of the batch: 'crc' is a reserved field`, { sessionId })
    }
    if (!isPlainJson(e)) {
      for (const key of Object.keys(e)) {
        if (isEnvelopeKey(key)) continue
        const value = (e as Record<string, unknown>)[key]
        if (value === undefined) continue
        const problem = plainJsonProblem(value, pathKey('', key))
        if (problem) {
          throw new SessionPersistenceError('E_NOT_JSON', `event '${e.type}' (seq ${e.seq}): ${problem}`, { sessionId })
        }
      }
    }
    if (i === 0) firstSeq = e.seq
    else if (e.seq !== firstSeq + i) {
      throw new SessionPersistenceError(
        'E_SEQ_NOT_CONTIGUOUS',
        `batch is not contiguous: event ${i} has seq ${e.seq}, expected ${firstSeq + i}`,
        { sessionId },
      )
    }
    const text1 = line(JSON.stringify(e))
    // A UTF-8 byte takes at most 3 bytes per UTF-16 unit: short lines skip the exact count.
    if ((text1.length + extra) * 3 > MAX_LINE_BYTES && Buffer.byteLength(text1) + extra > MAX_LINE_BYTES) {
      throw new SessionPersistenceError(
        'E_INVALID_EVENT',
        `event '${e.type}' (seq ${e.seq}) serializes to ${Buffer.byteLength(text1) + extra} bytes; a line holds at most ${MAX_LINE_BYTES} (64 MiB)`,
        { sessionId },
      )
    }
    text += `${text1}\n`
  }
  return { firstSeq, count: events.length, text }
}
