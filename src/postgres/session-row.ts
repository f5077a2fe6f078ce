import { type LockHolder, SessionPersistenceError } from '../errors.js'
import { applicationNameOf } from './config.js'
import type { Db } from './db.js'
import { ADVISORY_LOCK_ON } from './held-sessions.js'
import { heldInThisProcess, hostOfLockConnectionName, lockBackend, lockConnectionName, sessionKey, storeOfThisProcess } from './lock-connection.js'

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

/** The holder a row records, as a message names it. */
function recordedHolder(row: SessionRow | undefined): string {
  return row?.holderHost != null
    ? `host ${row.holderHost}, pid ${row.holderPid ?? '?'}, since ${row.holderSince?.toISOString() ?? '?'}`
    : 'another instance (not recorded yet)'
}

/** `E_LOCKED`, naming the holder the session's row records (host, pid, since when). */
export function lockedError(id: string, row: SessionRow | undefined, path: string, { lost = false }: { lost?: boolean } = {}): SessionPersistenceError {
  const holder = recordedHolder(row)
  const message = lost
    ? `session '${id}' was taken over by ${holder}; this instance no longer holds it and wrote nothing`
    : `session '${id}' is held by ${holder}`
  return new SessionPersistenceError('E_LOCKED', message, { sessionId: id, path, holder: holderOf(row) })
}

// The session's row (if any) and the connection holding its advisory lock now (if any): its
// application_name (visible to every role) and which backend of which server it is, in one
// statement.
const LOCKED_BY = (s: string) => `
  SELECT r.epoch, r.length, r.header_line, r.holder_host, r.holder_pid, r.holder_since,
         l.pid IS NOT NULL AS lock_held, l.pid AS lock_pid, a.application_name AS lock_app,
         extract(epoch FROM pg_postmaster_start_time())::text AS server_started
    FROM (SELECT hashtextextended($2, 0) AS k) h
    LEFT JOIN (
      SELECT writer_epoch::text AS epoch, length::float8 AS length, header_line, holder_host, holder_pid, holder_since
        FROM "${s}".sessions WHERE session_id = $1
    ) r ON true
    LEFT JOIN LATERAL (SELECT l.pid FROM pg_locks l WHERE ${ADVISORY_LOCK_ON('l', 'h.k')} LIMIT 1) l ON true
    LEFT JOIN pg_stat_activity a ON a.pid = l.pid`

/**
 * Every application_name a lock connection of a store of `host` shows in pg_stat_activity: the
 * one it has (lock-connection.ts lockConnectionName), and those of stores of earlier versions,
 * which gave the server applicationNameOf(host) as it is, kept with each byte outside printable
 * ASCII as '?' (PostgreSQL 15 and before) or '\xNN' (16 on), cut at 63 bytes. One for a
 * printable ASCII host.
 */
function lockConnectionNamesOf(host: string): Set<string> {
  const name = applicationNameOf(host)
  const kept = (byte: (b: number) => string) => {
    let s = ''
    for (const b of Buffer.from(name, 'utf8')) s += b >= 0x20 && b <= 0x7e ? String.fromCharCode(b) : byte(b)
    return s.slice(0, 63)
  }
  return new Set([lockConnectionName(name), kept(() => '?'), kept((b) => `\\x${b.toString(16).padStart(2, '0')}`)])
}

/**
 * The error for a session whose lock another connection has, naming who holds it as far as
 * that is known (SPEC §13). The lock is the truth; the row only records the last instance that
 * claimed the session, and an instance may hold the lock without a claim (a delete claims
 * nothing). The row is contradicted only where the lock's holding connection clearly says it is
 * wrong; elsewhere it is named, as it always was:
 * - the row names this process (its pid and the host of one of its stores), yet the holding
 *   connection is none of this process's lock connections (lock-connection.ts heldInThisProcess,
 *   asked of this server's backend): the row is stale, and the holder is told by its name, as
 *   below (a store of the row's host: that host, with its pid and since when unknown, 0);
 * - held by a store's connection (its name, lock-connection.ts lockConnectionName) of the host
 *   the row records (under any name such a store's connection has had): the row's holder (host,
 *   pid, since its claim);
 * - held by a store of another host, or with no holder recorded: that host, its pid and since
 *   when not known (0);
 * - held by a connection whose name is no store's (a store of an earlier version named by its
 *   connection string, say, or some other client): the row's holder, the name said with it; with
 *   no holder recorded (or a stale one), the name only, no holder;
 * - held by nobody any more (let go since the attempt): said so, no holder;
 * - nothing could be read: another instance, not named.
 * Two processes of one host that both claimed the session in turn are told apart only by the
 * row: the one named is the last to have claimed it.
 */
export async function lockedBy(db: Db, schema: string, id: string, path: string): Promise<SessionPersistenceError> {
  const key = sessionKey(schema, id)
  const found = await db
    .query<RawRow & { lock_held: boolean; lock_pid: number | null; lock_app: string | null; server_started: string }>(LOCKED_BY(schema), [id, key])
    .then(({ rows }) => rows[0])
    .catch(() => undefined)
  if (!found) return lockedError(id, undefined, path)
  const row = found.epoch === null ? undefined : toSessionRow(found)
  const held = (message: string, holder?: LockHolder) =>
    new SessionPersistenceError('E_LOCKED', `session '${id}' ${message}`, { sessionId: id, path, holder })
  if (!found.lock_held) return held('was held by another instance, which has let go of it since; try again')
  const app = found.lock_app ?? ''
  const recorded = row?.holderHost ?? undefined
  const stale =
    recorded !== undefined &&
    row!.holderPid === process.pid &&
    storeOfThisProcess(recorded) &&
    !heldInThisProcess(key, lockBackend(found.server_started, found.lock_pid!))
  const host = hostOfLockConnectionName(app)
  if (host === undefined) {
    if (recorded === undefined || stale) return held(`is held by a connection that is not a session store's (application_name '${app}')`)
    return held(
      `is held by ${recordedHolder(row)}, as its row records (the connection holding the lock is named '${app}', not as a session store's)`,
      holderOf(row),
    )
  }
  const ofRecordedHost = recorded !== undefined && lockConnectionNamesOf(recorded).has(app)
  if (ofRecordedHost && !stale) return lockedError(id, row, path)
  const holderHost = ofRecordedHost ? recorded! : host
  return held(
    `is held by an instance on host ${holderHost} (its pid and since when are not recorded: it holds the lock without having claimed the session)`,
    { host: holderHost, pid: 0, since: 0 },
  )
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
