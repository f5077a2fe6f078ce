import { SessionPersistenceError } from '../errors.js'
import { envelopeProblem, isEnvelopeKey } from './envelope.js'
import { isPlainJson, pathKey, plainJsonProblem } from './json-check.js'
import { CRC_FIELD_BYTES, type FormatVersion, sealBatch, sealLine, writeLines } from './line-codec.js'
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
/**
 * Above this many characters of JSON a batch is written straight into its buffer (`writeLines`):
 * memory for one huge line stays about twice its size. Below, the joined text is encoded at once
 * and sealed in one pass (a checksum over each line's bytes), the cheaper way for small batches.
 */
const DIRECT_CHARS = 1 << 20

export function prepareBatch(sessionId: string, events: readonly SessionEvent[], version: FormatVersion = 0): PreparedBatch {
  const { firstSeq, count, jsons, chars } = serializeLines(sessionId, events, version === 1 ? CRC_FIELD_BYTES : 0)
  if (chars >= DIRECT_CHARS) return { firstSeq, count, bytes: writeLines(jsons, version) }
  if (count === 0) return { firstSeq, count, bytes: Buffer.alloc(0) }
  const plain = Buffer.from(`${jsons.join('\n')}\n`, 'utf8')
  return { firstSeq, count, bytes: version === 1 ? sealBatch(plain, count) : plain }
}

/**
 * What `prepareBatch` checks and writes, as the lines joined by `\n` (no `\n` after the last)
 * and their size in a JSONL file (`bytes`: each line with its `\n`): text for an ordinary batch;
 * for one of a megabyte of JSON or more, the UTF-8 bytes, written straight into one buffer
 * (`writeLines`): a huge line is then not held again as sealed and joined text (§15.5).
 */
export function serializeEvents(
  sessionId: string,
  events: readonly SessionEvent[],
  version: FormatVersion = 0,
): { firstSeq: number; count: number; lines: string | Buffer; bytes: number } {
  const { firstSeq, count, jsons, chars } = serializeLines(sessionId, events, version === 1 ? CRC_FIELD_BYTES : 0)
  if (count === 0) return { firstSeq, count, lines: '', bytes: 0 }
  if (chars >= DIRECT_CHARS) {
    const written = writeLines(jsons, version)
    return { firstSeq, count, lines: written.subarray(0, written.length - 1), bytes: written.length }
  }
  const lines = version === 1 ? jsons.map((json) => sealLine(json, 1)).join('\n') : jsons.join('\n')
  return { firstSeq, count, lines, bytes: Buffer.byteLength(lines) + 1 }
}

/**
 * Checks a batch and serializes each event (`JSON.stringify`, keys in the caller's order); the
 * size limit counts `extra` bytes more a line (a checksum added afterwards). `chars` is their
 * total length in UTF-16 units.
 */
function serializeLines(
  sessionId: string,
  events: readonly SessionEvent[],
  extra: number,
): { firstSeq: number; count: number; jsons: string[]; chars: number } {
  if (!Array.isArray(events)) {
    throw new SessionPersistenceError('E_INVALID_EVENT', 'append expects an array of events', { sessionId })
  }
  const jsons: string[] = new Array(events.length)
  let chars = 0
  let firstSeq = 0
  for (let i = 0; i < events.length; i++) {
    try {
      const { json, seq } = serializeEvent(sessionId, events[i], i, i === 0 ? undefined : firstSeq, extra)
      if (i === 0) firstSeq = seq
      jsons[i] = json
      chars += json.length
    } catch (err) {
      if (err instanceof SessionPersistenceError) throw err
      // A getter of the event or of its content threw (or changed what it gives between the check
      // and the serialization): it is not plain data.
      throw new SessionPersistenceError('E_NOT_JSON', `event ${i} of the batch could not be read as JSON: ${err instanceof Error ? err.message : String(err)}`, {
        sessionId,
        cause: err,
      })
    }
  }
  return { firstSeq, count: events.length, jsons, chars }
}

/** An own enumerable field: what `JSON.stringify` writes (an inherited one, a getter of a class, or a non-enumerable one it skips). */
const written = (o: object, key: string) => Object.prototype.propertyIsEnumerable.call(o, key)

/**
 * Checks event `i` of a batch and serializes it: its envelope, its content as plain JSON, its seq
 * (`firstSeq + i`, unless it is the first). What is checked is what `JSON.stringify` writes: the
 * envelope's fields are the event's own enumerable ones (a getter of its class, a field inherited
 * from its prototype or a non-enumerable one is checked but not serialized), and no `toJSON`
 * stands in for it.
 */
function serializeEvent(sessionId: string, event: unknown, i: number, firstSeq: number | undefined, extra: number): { json: string; seq: number } {
  const envelope = envelopeProblem(event)
  if (envelope) {
    throw new SessionPersistenceError('E_INVALID_EVENT', `event ${i} of the batch: ${envelope}`, { sessionId })
  }
  const e = event as SessionEvent
  if (!written(e, 'seq') || !written(e, 'type') || !written(e, 'time') || (e.ignorable !== undefined && !written(e, 'ignorable'))) {
    throw new SessionPersistenceError(
      'E_INVALID_EVENT',
      `event ${i} of the batch: seq, type, time (and ignorable) must be its own enumerable fields, not inherited, getters of its class or hidden (JSON.stringify would not write them)`,
      { sessionId },
    )
  }
  if (typeof (e as { toJSON?: unknown }).toJSON === 'function') {
    throw new SessionPersistenceError('E_NOT_JSON', `event '${e.type}' (seq ${e.seq}) has a toJSON method: JSON.stringify would write what it returns instead`, { sessionId })
  }
  // `crc` is the checksum's name (§16): reserved in every version, so no log can hold both.
  if (e.crc !== undefined) {
    throw new SessionPersistenceError('E_INVALID_EVENT', `event ${i} of the batch: 'crc' is a reserved field`, { sessionId })
  }
  if (!isPlainJson(e)) {
    for (const key of Object.keys(e)) {
      if (isEnvelopeKey(key)) continue
      const value = (e as Record<string, unknown>)[key]
      if (value === undefined) continue
      let problem: string | undefined
      try {
        problem = plainJsonProblem(value, pathKey('', key))
      } catch (err) {
        if (!(err instanceof RangeError)) throw err
        problem = `${pathKey('', key)} is nested too deeply to check (${err.message})`
      }
      if (problem) {
        throw new SessionPersistenceError('E_NOT_JSON', `event '${e.type}' (seq ${e.seq}): ${problem}`, { sessionId })
      }
    }
  }
  const seq = e.seq
  if (firstSeq !== undefined && seq !== firstSeq + i) {
    throw new SessionPersistenceError(
      'E_SEQ_NOT_CONTIGUOUS',
      `batch is not contiguous: event ${i} has seq ${seq}, expected ${firstSeq + i}`,
      { sessionId },
    )
  }
  let json: string
  try {
    json = JSON.stringify(e)
  } catch (err) {
    // Plain JSON nested deeper than the engine's stack: JSON.stringify overflows it.
    if (!(err instanceof RangeError)) throw err
    throw new SessionPersistenceError('E_NOT_JSON', `event '${e.type}' (seq ${e.seq}) is nested too deeply to serialize (${err.message})`, { sessionId, cause: err })
  }
  // A UTF-8 byte takes at most 3 bytes per UTF-16 unit: short lines skip the exact count.
  if ((json.length + extra) * 3 > MAX_LINE_BYTES && Buffer.byteLength(json) + extra > MAX_LINE_BYTES) {
    throw new SessionPersistenceError(
      'E_INVALID_EVENT',
      `event '${e.type}' (seq ${e.seq}) serializes to ${Buffer.byteLength(json) + extra} bytes; a line holds at most ${MAX_LINE_BYTES} (64 MiB)`,
      { sessionId },
    )
  }
  return { json, seq }
}
