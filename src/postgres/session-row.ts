import { type LockHolder, SessionPersistenceError } from '../errors.js'
import type { Db } from './db.js'

/** Who holds a session, as its row records it. */
export interface SessionRow {
  epoch: string
  length: number
  headerLine: string
  holderHost: string | null
  holderPid: number | null
  holderSince: Date | null
}

const ROW = (s: string) => `
  SELECT writer_epoch::text AS epoch, length::float8 AS length, header_line, holder_host, holder_pid, holder_since
    FROM "${s}".sessions WHERE session_id = $1`

interface RawRow {
  epoch: string
  length: number
  header_line: string
  holder_host: string | null
  holder_pid: number | null
  holder_since: Date | null
}

export function toSessionRow(r: RawRow): SessionRow {
  return {
    epoch: r.epoch,
    length: r.length,
    headerLine: r.header_line,
    holderHost: r.holder_host,
    holderPid: r.holder_pid,
    holderSince: r.holder_since,
  }
}

export async function readSessionRow(db: Db, schema: string, id: string): Promise<SessionRow | undefined> {
  const { rows } = await db.query<RawRow>(ROW(schema), [id])
  return rows[0] ? toSessionRow(rows[0]) : undefined
}

/** The holder a row records, as `E_LOCKED` carries it (undefined while none is recorded). */
function holderOf(row: SessionRow | undefined): LockHolder | undefined {
  if (row?.holderHost == null) return undefined
  return { pid: row.holderPid ?? 0, host: row.holderHost, since: row.holderSince?.getTime() ?? 0 }
}

/** `E_LOCKED`, naming the holder the session's row records (host, pid, since when). */
export function lockedError(id: string, row: SessionRow | undefined, path: string, { lost = false }: { lost?: boolean } = {}): SessionPersistenceError {
  const holder =
    row?.holderHost != null
      ? `host ${row.holderHost}, pid ${row.holderPid ?? '?'}, since ${row.holderSince?.toISOString() ?? '?'}`
      : 'another instance (not recorded yet)'
  const message = lost
    ? `session '${id}' was taken over by ${holder}; this instance no longer holds it and wrote nothing`
    : `session '${id}' is held by ${holder}`
  return new SessionPersistenceError('E_LOCKED', message, { sessionId: id, path, holder: holderOf(row) })
}

/** The holder's error for a session whose lock another connection has: reads who it is. */
export async function lockedBy(db: Db, schema: string, id: string, path: string): Promise<SessionPersistenceError> {
  const row = await readSessionRow(db, schema, id).catch(() => undefined)
  return lockedError(id, row, path)
}

/** A fresh fencing token: every claim of a session draws one, never reused. */
export async function nextEpoch(db: Db, schema: string): Promise<string> {
  const { rows } = await db.query<{ epoch: string }>(`SELECT nextval('"${schema}".writer_epochs')::text AS epoch`)
  return rows[0]!.epoch
}

/**
 * Makes `epoch` the session's writer token and records us as its holder. Runs only while this
 * instance holds the session's advisory lock; every batch of an older token is refused from now.
 * `returning`: more columns of the claimed row `s` to return with it (a tail load's probes).
 */
export async function claimSession<Extra extends object = object>(
  db: Db,
  schema: string,
  id: string,
  epoch: string,
  host: string,
  returning?: string,
): Promise<({ headerLine: string; length: number } & Extra) | undefined> {
  const { rows } = await db.query<{ header_line: string; length: number } & Extra>(
    `UPDATE "${schema}".sessions s
        SET writer_epoch = $2::bigint, holder_host = $3, holder_pid = $4::integer, holder_since = now()
      WHERE session_id = $1
      RETURNING header_line, length::float8 AS length${returning ? `, ${returning}` : ''}`,
    [id, epoch, host, process.pid],
  )
  const row = rows[0]
  if (!row) return undefined
  const { header_line, ...rest } = row
  return { ...(rest as unknown as Extra & { length: number }), headerLine: header_line }
}
