import type { RawSessionLog } from '../persistence.js'
import { checkRawEventLine, LONE_SURROGATE } from '../session/raw-log.js'
import { SessionPersistenceError } from '../errors.js'
import { changeChannel, changePayload } from './change-feed.js'
import type { Db } from './db.js'
import { kindOf } from './event-kinds.js'
import type { FormatVersion } from '../session/line-codec.js'
import type { SessionHeader } from '../session/schema.js'
import { parseStoredHeader } from './read-session.js'

/** Lines per INSERT: big logs go in several statements of one transaction. */
const CHUNK = 5_000

const INSERT_ROW = (s: string) => `
  INSERT INTO "${s}".sessions
    (session_id, header_line, created_at, length, size_bytes, writer_epoch, holder_host, holder_pid, holder_since)
  VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7, $8::integer, now())
  ON CONFLICT (session_id) DO NOTHING`

const INSERT_LINES = (s: string) => `
  INSERT INTO "${s}".events (session_id, seq, line, kind)
  SELECT $1, $2::bigint + u.ord - 1, u.line, u.kind
    FROM ROWS FROM (unnest($3::text[]), unnest($4::smallint[])) WITH ORDINALITY AS u(line, kind, ord)`

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

/**
 * Checks a raw log as `load` would read it (header id = `log.id`, valid lines of the header's
 * format version, seqs from 0),
 * so nothing is stored that could not be loaded back. Returns the header's createdAt and the
 * kind of each line.
 */
export function checkRawLog(log: RawSessionLog, path: string): { createdAt: number; kinds: number[] } {
  if (typeof log !== 'object' || log === null || typeof log.headerLine !== 'string' || !Array.isArray(log.eventLines)) {
    throw new SessionPersistenceError('E_INVALID_EVENT', 'importRaw expects { id, headerLine, eventLines }', { path })
  }
  const { createdAt, version } = checkRawHeader(log.id, log.headerLine, path)
  const kinds = log.eventLines.map((line, i) => checkRawLine(line, i, log.id, path, version))
  return { createdAt, kinds }
}

/** Stores a checked raw log in one transaction; `E_EXISTS` when the id is stored already. */
export async function importRawLog(
  db: Db,
  schema: string,
  log: RawSessionLog,
  { createdAt, kinds }: { createdAt: number; kinds: readonly number[] },
  holder: { epoch: string; host: string },
  path: string,
): Promise<void> {
  const bytes = log.eventLines.reduce((n, line) => n + Buffer.byteLength(line) + 1, Buffer.byteLength(log.headerLine) + 1)
  await db.transaction(async (client) => {
    const created = await client.query(INSERT_ROW(schema), [
      log.id,
      log.headerLine,
      createdAt,
      log.eventLines.length,
      bytes,
      holder.epoch,
      holder.host,
      process.pid,
    ])
    if (created.rowCount !== 1) {
      throw new SessionPersistenceError('E_EXISTS', `a log for session '${log.id}' already exists`, { sessionId: log.id, path })
    }
    for (let from = 0; from < log.eventLines.length; from += CHUNK) {
      const chunk = log.eventLines.slice(from, from + CHUNK)
      await client.query(INSERT_LINES(schema), [log.id, from, chunk, `{${kinds.slice(from, from + CHUNK).join(',')}}`])
    }
    await client.query('SELECT pg_notify($1, $2)', [changeChannel(schema), changePayload(log.id)]) // delivered at COMMIT
  })
}
