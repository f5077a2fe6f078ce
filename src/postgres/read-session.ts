import pg from 'pg'
import { envelopeProblem } from '../session/envelope.js'
import { parseHeaderLine } from '../session/header-line.js'
import { checkSuffix, checksumReason, CRC_SUFFIX_BYTES, type FormatVersion, unsealString } from '../session/line-codec.js'
import type { SessionEvent, SessionHeader } from '../session/schema.js'
import { SessionPersistenceCorruptionError, SessionPersistenceError } from '../errors.js'
import type { Db } from './db.js'
import { PARTED_BYTES, readPartedLine } from './line-parts.js'

const HEAD = (s: string) => `SELECT header_line, length::float8 AS length FROM "${s}".sessions WHERE session_id = $1`
// A line of $4 bytes or more comes back as its size in bytes (digits: no stored line starts
// with one but a damaged one, and one of those is judged the same read either way), and is then
// read in parts (line-parts.ts); its size is known without reading it (the value's header). One
// column, not a line and a size: a second column cost every load 4% more time in the query.
export const LINE_OR_SIZE = (param: string, column = 'line') =>
  `CASE WHEN octet_length(${column}) < ${param} THEN ${column} ELSE octet_length(${column})::text END`
// Only a short one: a line of PARTED_BYTES or more is never fetched whole (§15.5), also when a
// session re-created meanwhile holds one of another size at that seq.
const ONE_LINE = (s: string) => `SELECT line FROM "${s}".events WHERE session_id = $1 AND seq = $2::bigint AND octet_length(line) < $3`

/** Rows a pass that hands events on (and keeps none) reads at most: see readEvents. */
const ONWARD_PASS = 10_000

const LINES = (s: string) =>
  `SELECT ${LINE_OR_SIZE('$4')} FROM "${s}".events WHERE session_id = $1 AND seq >= $2::bigint AND seq < $3::bigint ORDER BY seq`

/** The size a LINES row gives in place of a line of PARTED_BYTES or more, else undefined. */
export function partedSize(value: string): number | undefined {
  const c = value.charCodeAt(0)
  if (c < 0x30 || c > 0x39 || value.length > 12 || !/^[0-9]+$/.test(value)) return undefined
  const size = Number(value)
  return size >= PARTED_BYTES ? size : undefined
}

export interface StoredLog {
  header: SessionHeader
  headerLine: string
  events: SessionEvent[]
  /** The exact event lines, only when asked for (readRaw). */
  lines: string[] | undefined
}

/** Parses a stored header line as the JSONL reader parses line 1 (`E_FORMAT_UNSUPPORTED`, `E_CORRUPT`). */
export function parseStoredHeader(line: string, id: string | undefined, path: string): SessionHeader {
  const buf = Buffer.from(line, 'utf8')
  return parseHeaderLine(buf, 0, buf.length, true, { path, sessionId: id })
}

/** `,"crc":"` + 8 lowercase hex digits + `"}` at the end: the checksum field is there (its value may be wrong). */
const CRC_FIELD = /,"crc":"[0-9a-f]{8}"\}$/

/**
 * The JSON text of a stored line of `version` (§16): a version-1 line checked against its
 * checksum and without it (events never carry `crc`), a version-0 line as it is; or the reason
 * it is damage.
 */
export function lineText(line: string, version: FormatVersion): { text: string } | { reason: string } {
  if (version === 0) return { text: line }
  const text = unsealString(line)
  return text !== undefined ? { text } : { reason: checksumReason(CRC_FIELD.test(line) ? 'mismatch' : 'missing') }
}

/**
 * Parses and checks a stored event line of `version` as the JSONL reader does (its checksum in
 * version 1, JSON, envelope, seq). A database has no torn tail (a transaction is all or
 * nothing), so any defect is damage: `E_CORRUPT` naming the line (and the seq it stands at).
 */
export function parseEventLine(line: string, index: number, path: string, id: string, version: FormatVersion): SessionEvent {
  if (line.includes('\n')) throw damage(index, 'the line holds a newline', path, id)
  const decoded = lineText(line, version)
  if ('reason' in decoded) throw damage(index, `${decoded.reason} (seq ${index})`, path, id)
  return parseEventJson(decoded.text, index, path, id, version)
}

/** Parses and checks the JSON text of an event line (its checksum already checked and cut). */
function parseEventJson(text: string, index: number, path: string, id: string, version: FormatVersion): SessionEvent {
  let value: unknown
  let reason: string | undefined
  try {
    value = JSON.parse(text)
    reason = envelopeProblem(value)
    // A sealed line whose JSON holds a crc of its own is a defect, as on JSONL (§16: reserved).
    if (reason === undefined && version === 1 && (value as { crc?: unknown }).crc !== undefined) reason = 'a reserved crc field inside the line'
    if (reason === undefined && (value as SessionEvent).seq !== index) {
      reason = `seq ${(value as SessionEvent).seq} where ${index} was expected`
    }
  } catch (err) {
    reason = `not JSON: ${(err as Error).message}`
  }
  if (reason !== undefined) throw damage(index, reason, path, id)
  return value as SessionEvent
}

/**
 * A stored line's defect: line numbers as in the JSONL file (the header is line 1). The byte
 * offset is not tracked on this path (it would cost every load); -1 says so.
 */
function damage(index: number, reason: string, path: string, id: string): SessionPersistenceCorruptionError {
  return new SessionPersistenceCorruptionError(index + 2, -1, reason, { path, sessionId: id })
}

/** Which session's row a parted read reads, and how its lines are checked. */
export interface PartedWhere {
  schema: string
  id: string
  path: string
  version: FormatVersion
}

/** A parted line read: its event, and its text when asked for. */
export interface PartedRead {
  event: SessionEvent
  line: string | undefined
}

/**
 * Reads the line at `seq` (`size` bytes, PARTED_BYTES or more) in parts and checks it as
 * parseEventLine checks a line, without making its text more than once (§15.5); the line itself
 * is made only when `keepLine` asks for it. `undefined` when the row is gone (a snapshot or the
 * lock rules that out; a watcher's poll does not).
 */
export async function readPartedEvent(client: pg.ClientBase, where: PartedWhere, seq: number, size: number, keepLine: boolean): Promise<PartedRead | undefined> {
  const { schema, id, path, version } = where
  const sealed = version === 1
  const got = await readPartedLine(client, schema, id, seq, size, sealed ? { keepBytes: CRC_SUFFIX_BYTES, close: '}' } : { keepBytes: 0, close: '' })
  if (!got) return undefined
  if (got.newline) throw damage(seq, 'the line holds a newline', path, id)
  if (sealed) {
    const verdict = checkSuffix(got.tail, got.crc)
    if (verdict !== 'ok') throw damage(seq, `${checksumReason(verdict)} (seq ${seq})`, path, id)
  }
  const event = parseEventJson(got.text, seq, path, id, version)
  return { event, line: keepLine ? (sealed ? got.text.slice(0, -1) + got.tail : got.text) : undefined }
}

/** readPartedEvent where the row cannot be gone (a snapshot or the lock): a gone row is a defect. */
export async function readPartedEventHeld(client: pg.ClientBase, where: PartedWhere, seq: number, size: number, keepLine: boolean): Promise<PartedRead> {
  const read = await readPartedEventOrLine(client, where, seq, size, keepLine)
  if (!read) throw damage(seq, 'the row changed while it was read', where.path, where.id)
  return read
}

/**
 * readPartedEvent, and when the row is not there at that size, the row read again as a short line
 * and judged whole as any line is (a damaged short line that reads as a size: digits).
 * Undefined only when the row is gone.
 */
export async function readPartedEventOrLine(client: pg.ClientBase, where: PartedWhere, seq: number, size: number, keepLine: boolean): Promise<PartedRead | undefined> {
  const read = await readPartedEvent(client, where, seq, size, keepLine)
  if (read) return read
  const { rows } = await client.query<{ line: string }>(ONE_LINE(where.schema), [where.id, seq, PARTED_BYTES])
  if (!rows[0]) return undefined
  return { event: parseEventLine(rows[0].line, seq, where.path, where.id, where.version), line: keepLine ? rows[0].line : undefined }
}

/** A session's row as reads need it: its header line and how many events it holds. */
export interface StoredHead {
  headerLine: string
  length: number
}

/** The session's header line and length (`undefined` when it has no row). */
export async function readHead(client: pg.ClientBase, schema: string, id: string): Promise<StoredHead | undefined> {
  const { rows } = await client.query<{ header_line: string; length: number }>(HEAD(schema), [id])
  const row = rows[0]
  return row ? { headerLine: row.header_line, length: row.length } : undefined
}

/**
 * Reads a session's header and its events from `fromSeq` (default 0) to its stored length,
 * each line checked in the header's format version
 * (`undefined` when it has no row). Run inside one snapshot (`readSnapshot`) or under the
 * session's lock: the rows below the length read first never change.
 */
export async function readStoredLog(
  client: pg.ClientBase,
  schema: string,
  id: string,
  path: string,
  options: { keepLines?: boolean; head?: StoredHead; fromSeq?: number } = {},
): Promise<StoredLog | undefined> {
  const head = options.head ?? (await readHead(client, schema, id))
  if (!head) return undefined
  const header = parseStoredHeader(head.headerLine, id, path)
  const { events, lines } = await readEvents(client, schema, id, path, options.fromSeq ?? 0, head.length, header.version, options)
  return { header, headerLine: head.headerLine, events, lines }
}

/**
 * The events with `from <= seq < to`, through the primary key (an index range scan: nothing
 * before `from` is read), each checked as the JSONL reader checks a line of `version`. One query whose rows
 * are parsed as they arrive and never accumulated: a 100k-event load holds its events, not also
 * every raw row (node-postgres streams rows to a 'row' listener).
 */
export async function readEvents(
  client: pg.ClientBase,
  schema: string,
  id: string,
  path: string,
  from: number,
  to: number,
  version: FormatVersion,
  /**
   * `onEvent`: each event handed to it as it is checked, none kept (a pass of any size, `verify`).
   * `known`: events of lines of PARTED_BYTES or more read and checked already (under the same
   * lock), taken instead of reading those lines again; not with `keepLines`.
   */
  options: { keepLines?: boolean; onEvent?: (event: SessionEvent) => void; known?: ReadonlyMap<number, SessionEvent> } = {},
): Promise<{ events: SessionEvent[]; lines: string[] | undefined; count: number }> {
  const events: SessionEvent[] = []
  const lines: string[] | undefined = options.keepLines ? [] : undefined
  const { onEvent } = options
  const where = { schema, id, path, version }
  let count = 0
  // A pass reads the rows from `start`. A line of PARTED_BYTES or more is read in parts after the
  // pass: kept events get a slot filled then; handed on (onEvent), the pass stops at it (the rows
  // after it are ignored, never held) and the next pass starts after it.
  for (let start = from; start < to; ) {
    const parted: { slot: number; seq: number; size: number }[] = []
    let failed: { err: unknown; seq: number } | undefined
    let stopped: { seq: number; size: number } | undefined
    let received = 0
    let end = to
    await new Promise<void>((resolve, reject) => {
      // Handing events on, a pass reads at most ONWARD_PASS rows: one that stops at a huge line
      // has its later rows sent for nothing, at most that many.
      const passTo = onEvent ? Math.min(to, start + ONWARD_PASS) : to
      end = passTo
      const config = { text: LINES(schema), values: [id, start, passTo, PARTED_BYTES], rowMode: 'array' }
      const query = new pg.Query<[string]>(config as pg.QueryConfig)
      query.on('row', (row) => {
        const line = row[0]
        const seq = start + received++
        if (failed !== undefined || stopped !== undefined) return
        const size = partedSize(line)
        if (size !== undefined) {
          if (onEvent) stopped = { seq, size }
          else {
            parted.push({ slot: events.length, seq, size })
            events.push(undefined as never) // filled below
            lines?.push(undefined as never)
          }
          return
        }
        try {
          const event = parseEventLine(line, seq, path, id, version)
          if (onEvent) onEvent(event)
          else events.push(event)
          lines?.push(line)
        } catch (err) {
          failed = { err, seq }
        }
      })
      query.on('error', reject)
      query.on('end', () => resolve())
      void client.query(query)
    })
    // Parted lines before the pass's first defect are judged first: the first defect is reported.
    for (const p of parted) {
      if (failed !== undefined && p.seq > failed.seq) break
      const known = lines === undefined ? options.known?.get(p.seq) : undefined
      const { event, line } = known ? { event: known, line: undefined } : await readPartedEventHeld(client, where, p.seq, p.size, lines !== undefined)
      events[p.slot] = event
      if (lines) lines[p.slot] = line!
    }
    if (failed !== undefined) throw failed.err
    if (stopped !== undefined) {
      onEvent!((await readPartedEventHeld(client, where, stopped.seq, stopped.size, false)).event)
      count = stopped.seq + 1 - from
      start = stopped.seq + 1
      continue
    }
    count = start - from + received
    // A pass that read every row it asked for goes on from its end; a short one ends the read
    // (rows are missing: reported below).
    if (end === to || received < end - start) break
    start = end
  }
  if (count !== Math.max(0, to - from)) {
    throw new SessionPersistenceCorruptionError(from + count + 2, -1, 'rows are missing below the stored length', {
      path,
      sessionId: id,
    })
  }
  return { events, lines, count }
}

/** Runs `fn` in a read-only REPEATABLE READ transaction: one consistent snapshot, no locks taken. */
export function readSnapshot<T>(db: Db, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return db.with(async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    try {
      return await fn(client)
    } finally {
      await client.query('COMMIT').catch(() => {})
    }
  })
}

export function notFound(id: string, path: string): SessionPersistenceError {
  return new SessionPersistenceError('E_NOT_FOUND', `no stored session '${id}'`, { sessionId: id, path })
}
