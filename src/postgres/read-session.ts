import pg from 'pg'
import { envelopeProblem } from '../session/envelope.js'
import { parseHeaderLine } from '../session/header-line.js'
import { checksumReason, type FormatVersion, unsealString } from '../session/line-codec.js'
import type { SessionEvent, SessionHeader } from '../session/schema.js'
import { SessionPersistenceCorruptionError, SessionPersistenceError } from '../errors.js'
import type { Db } from './db.js'

const HEAD = (s: string) => `SELECT header_line, length::float8 AS length FROM "${s}".sessions WHERE session_id = $1`
const LINES = (s: string) =>
  `SELECT line FROM "${s}".events WHERE session_id = $1 AND seq >= $2::bigint AND seq < $3::bigint ORDER BY seq`

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
  let value: unknown
  let reason: string | undefined
  if (line.includes('\n')) reason = 'the line holds a newline'
  else {
    const decoded = lineText(line, version)
    if ('reason' in decoded) reason = `${decoded.reason} (seq ${index})`
    else {
      try {
        value = JSON.parse(decoded.text)
        reason = envelopeProblem(value)
        // A sealed line whose JSON holds a crc of its own is a defect, as on JSONL (§16: reserved).
        if (reason === undefined && version === 1 && (value as { crc?: unknown }).crc !== undefined) reason = 'a reserved crc field inside the line'
        if (reason === undefined && (value as SessionEvent).seq !== index) {
          reason = `seq ${(value as SessionEvent).seq} where ${index} was expected`
        }
      } catch (err) {
        reason = `not JSON: ${(err as Error).message}`
      }
    }
  }
  if (reason !== undefined) {
    // Line numbers as in the JSONL file: the header is line 1. The byte offset is not tracked
    // on this path (it would cost every load); -1 says so.
    throw new SessionPersistenceCorruptionError(index + 2, -1, reason, { path, sessionId: id })
  }
  return value as SessionEvent
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
  /** `onEvent`: each event handed to it as it is checked, none kept (a pass of any size, `verify`). */
  options: { keepLines?: boolean; onEvent?: (event: SessionEvent) => void } = {},
): Promise<{ events: SessionEvent[]; lines: string[] | undefined; count: number }> {
  const events: SessionEvent[] = []
  const lines: string[] | undefined = options.keepLines ? [] : undefined
  const { onEvent } = options
  let count = 0
  if (to > from) {
    await new Promise<void>((resolve, reject) => {
      let failed: unknown
      const config = { text: LINES(schema), values: [id, from, to], rowMode: 'array' }
      const query = new pg.Query<[string]>(config as pg.QueryConfig)
      query.on('row', (row) => {
        if (failed !== undefined) return
        try {
          const event = parseEventLine(row[0], from + count, path, id, version)
          count++
          if (onEvent) onEvent(event)
          else events.push(event)
          lines?.push(row[0])
        } catch (err) {
          failed = err
        }
      })
      query.on('error', reject)
      query.on('end', () => (failed === undefined ? resolve() : reject(failed)))
      void client.query(query)
    })
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
