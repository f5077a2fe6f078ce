import { basename } from 'node:path'
import { isSessionPersistenceError, SessionPersistenceCorruptionError, SessionPersistenceError } from '../errors.js'
import { computeClosers } from '../session/closers.js'
import { type FormatVersion, SealedLines, sealLine, unsealText } from '../session/line-codec.js'
import { headerLine, metaFromHeader } from '../session/meta.js'
import type { JsonValue, SessionEvent, SessionHeader } from '../session/schema.js'
import { isEnvelopeKey } from '../session/envelope.js'
import type { FileHandle } from './fs/file-system.js'
import type { BodyWriter } from './materialize.js'
import type { RepairReport } from '../persistence.js'
import { LOG_SUFFIX, uniqueToken } from './paths.js'
import { createHash } from 'node:crypto'
import { forEachBlockForward } from './read-forward.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import type { StoreContext } from './store-context.js'

// The operator's rewrites of a closed log (§16): migrate, redact and repair --truncate-at-damage.
// Each builds the new log as a body that `rewriteLog` writes beside the old one and renames over
// it; the caller holds the session's lock and has repaired the tail first.

/** Pieces of about this size go to the file at once. */
const WRITE_BYTES = 1 << 20

/** Collects text into pieces of about WRITE_BYTES and hands them to `write`. */
function batcher(write: (piece: Buffer) => Promise<void>) {
  let parts: string[] = []
  let size = 0
  return {
    async add(text: string) {
      parts.push(text)
      size += text.length
      if (size >= WRITE_BYTES) await this.flush()
    },
    async flush() {
      if (parts.length === 0) return
      const piece = Buffer.from(parts.join(''), 'utf8')
      parts = []
      size = 0
      await write(piece)
    },
  }
}

/** The JSON text of a stored line of a log of `version` (its checksum removed). */
function jsonOf(line: string, version: FormatVersion): string {
  return version === 1 ? unsealText(line) : line
}

/**
 * The log as version 1 (§16), in one pass that also checks it as `load` does: the header
 * sealed, each valid event line sealed as it stands (its JSON text kept byte for byte), the
 * closers of an open turn after them. Damage is refused (`E_CORRUPT`: the body fails and its
 * file is removed); a torn tail is left out, as a load would cut it. `done` receives the
 * repair that the load would have made and the number of events.
 */
export function migratedBody(
  handle: FileHandle,
  path: string,
  id: string,
  header: SessionHeader,
  done: (result: { events: number; repair: Omit<RepairReport, 'persisted'> | undefined }) => void,
): BodyWriter {
  return async (write) => {
    const out = new SealedLines()
    out.addText(headerLine(metaFromHeader(header), 1))
    const scan = await scanLog(handle, {
      path,
      sessionId: id,
      keepEvents: 'open-turn',
      onEventLine: (buf, start, end) => out.add(buf, start, end),
      afterChunk: async () => {
        if (out.length >= WRITE_BYTES) await write(out.take())
      },
    })
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true }) // committed damage: E_CORRUPT
    for (const closer of plan.closers) out.addText(`${sealLine(JSON.stringify(closer), 1)}\n`)
    await write(out.take())
    done({ events: scan.eventCount + plan.closers.length, repair: plan.report })
  }
}

export interface RedactionCount {
  matches: number
  seqs: number[]
  /** The `log/redacted` event, once written. */
  record?: SessionEvent
}

/** Replaces every match of `pattern` in the string values of `value` (never keys); counts them. */
function redactValue(value: JsonValue, pattern: RegExp, replacement: string, count: { n: number }): JsonValue {
  if (typeof value === 'string') {
    return value.replace(pattern, () => {
      count.n++
      return replacement
    })
  }
  if (Array.isArray(value)) return value.map((v) => redactValue(v, pattern, replacement, count))
  if (value !== null && typeof value === 'object') {
    const out: { [k: string]: JsonValue } = {}
    for (const [k, v] of Object.entries(value)) out[k] = redactValue(v, pattern, replacement, count)
    return out
  }
  return value
}

/**
 * An event with every match of `pattern` in its content (`data` and extra fields, never the
 * envelope nor any key) replaced, and how many there were.
 */
export function redactEvent(event: SessionEvent, pattern: RegExp, replacement: string): { event: SessionEvent; matches: number } {
  const count = { n: 0 }
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(event)) out[k] = isEnvelopeKey(k) || v === undefined ? v : redactValue(v as JsonValue, pattern, replacement, count)
  return { event: out as SessionEvent, matches: count.n }
}

/**
 * The log with `pattern` redacted (§16), then an ignorable `log/redacted` event recording when,
 * how many matches and which seqs (never the matched text). Lines without a match keep their
 * bytes; the version is the log's. `count` receives the matches as they are found; with
 * `write` undefined nothing is written (a dry run).
 */
export function redactedBody(
  handle: FileHandle,
  header: SessionHeader,
  headerBytes: number,
  size: number,
  options: { pattern: RegExp; replacement: string; count: RedactionCount; now: number },
): BodyWriter {
  const { pattern, replacement, count } = options
  const version = header.version
  return async (write) => {
    const out = batcher(write)
    await out.add(headerLine(metaFromHeader(header), version))
    let next = 0
    let time = header.createdAt
    for await (const line of forEachBlockForward(handle, headerBytes, size)) {
      const event = JSON.parse(jsonOf(line, version)) as SessionEvent
      next = event.seq + 1
      time = event.time
      const redacted = redactEvent(event, pattern, replacement)
      if (redacted.matches > 0) {
        count.matches += redacted.matches
        count.seqs.push(event.seq)
        await out.add(`${sealLine(JSON.stringify(redacted.event), version)}\n`)
      } else {
        await out.add(`${line}\n`)
      }
    }
    const record: SessionEvent = {
      seq: next,
      type: 'log/redacted',
      time: Math.max(time, options.now),
      ignorable: true,
      data: { at: options.now, matches: count.matches, seqs: count.seqs, replacement },
    }
    await out.add(`${sealLine(JSON.stringify(record), version)}\n`)
    await out.flush()
    count.record = record
  }
}

/** Counts the matches of a redaction without writing anything (`--dry-run`). */
export async function countRedactions(handle: FileHandle, header: SessionHeader, headerBytes: number, size: number, pattern: RegExp): Promise<RedactionCount> {
  const count: RedactionCount = { matches: 0, seqs: [] }
  for await (const line of forEachBlockForward(handle, headerBytes, size)) {
    const event = JSON.parse(jsonOf(line, header.version)) as SessionEvent
    const { matches } = redactEvent(event, pattern, '')
    if (matches > 0) {
      count.matches += matches
      count.seqs.push(event.seq)
    }
  }
  return count
}

export interface DamageCut {
  /** 1-based line and file offset of the first damaged line. */
  line: number
  byteOffset: number
  reason: string
}

/** Where a log is damaged: the first `E_CORRUPT` a full read meets (a header is never cut), or undefined. */
export async function findDamage(handle: FileHandle, path: string, id: string): Promise<DamageCut | undefined> {
  try {
    const scan = await scanLog(handle, { path, sessionId: id, keepEvents: false })
    planRepair(scan, { path, sessionId: id, closeOpenTurn: false })
    return undefined
  } catch (err) {
    if (!isSessionPersistenceError(err, 'E_CORRUPT')) throw err
    const { line, byteOffset, reason } = err as SessionPersistenceCorruptionError
    if (line <= 1) {
      throw new SessionPersistenceError('E_CORRUPT', `the header of session '${id}' is damaged (${reason}): there is nothing before it to keep`, { sessionId: id, path, cause: err })
    }
    return { line, byteOffset, reason }
  }
}

/**
 * The name the whole damaged log is kept under, beside it: a dot name, never listed nor loaded.
 * It holds the log's own name while that fits in a file name (255 bytes), else a hash of it, so
 * no valid id can make it fail (§3.2); `log/truncated` records it either way.
 */
export function keptAsideName(path: string): string {
  const name = basename(path)
  const plain = `.damaged-${uniqueToken()}-${name}`
  if (Buffer.byteLength(plain) <= 255) return plain
  return `.damaged-${uniqueToken()}-${createHash('sha256').update(name).digest('hex').slice(0, 32)}${LOG_SUFFIX}`
}

/** Copies `[0, size)` of a file as a body (the damaged log kept aside whole). */
export function copyBody(handle: FileHandle, size: number): BodyWriter {
  return async (write) => {
    const buf = Buffer.allocUnsafe(WRITE_BYTES)
    for (let at = 0; at < size; ) {
      const n = await handle.read(buf, 0, Math.min(buf.length, size - at), at)
      if (n === 0) break
      await write(Buffer.from(buf.subarray(0, n)))
      at += n
    }
  }
}

/**
 * The log cut at its first damaged line (§16): the valid prefix before it (what a load keeps of
 * it, a torn tail in it cut as a load cuts it), the closers of an open turn, then an ignorable
 * `log/truncated` event recording where it cut and where the whole log was kept.
 */
export async function truncatedBody(
  handle: FileHandle,
  path: string,
  id: string,
  cut: DamageCut,
  keptAt: string,
  now: number,
  fileSize: number,
): Promise<{ body: BodyWriter; kept: number; closers: SessionEvent[]; record: SessionEvent }> {
  const scan = await scanLog(handle, { path, sessionId: id, to: cut.byteOffset })
  const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true })
  const version = scan.header.version
  const last = scan.events.at(-1)
  const closers = computeClosers(scan.events, scan.header.createdAt)
  const record: SessionEvent = {
    seq: scan.events.length + closers.length,
    type: 'log/truncated',
    time: Math.max(closers.at(-1)?.time ?? last?.time ?? scan.header.createdAt, now),
    ignorable: true,
    data: { at: now, line: cut.line, byteOffset: cut.byteOffset, reason: cut.reason, droppedBytes: fileSize - plan.keepBytes, keptAt },
  }
  const keep = plan.keepBytes
  const tail = [...closers, record].map((e) => `${sealLine(JSON.stringify(e), version)}\n`).join('')
  const body: BodyWriter = async (write) => {
    await copyBody(handle, keep)(write)
    await write(Buffer.from(tail, 'utf8'))
  }
  return { body, kept: scan.events.length, closers, record }
}

