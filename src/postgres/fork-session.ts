import type { SessionHeader, SessionMeta } from '../session/schema.js'
import { SessionPersistenceError } from '../errors.js'
import { changeChannel, changePayload } from './change-feed.js'
import type { Db } from './db.js'
import { notFound, parseEventLine, parseStoredHeader, readSnapshot } from './read-session.js'

// The seed is copied inside the database: the parent's lines never travel to the client.
const INSERT_CHILD = (s: string) => `
  INSERT INTO "${s}".sessions
    (session_id, header_line, created_at, length, size_bytes, writer_epoch, holder_host, holder_pid, holder_since)
  SELECT $1, $2, $3::bigint, $4::bigint,
         $5::bigint + (SELECT coalesce(sum(octet_length(line) + 1), 0) FROM "${s}".events WHERE session_id = $6 AND seq < $4::bigint),
         $7::bigint, $8, $9::integer, now()
  ON CONFLICT (session_id) DO NOTHING`

const COPY_SEED = (s: string) => `
  INSERT INTO "${s}".events (session_id, seq, line, kind)
  SELECT $1, seq, line, kind FROM "${s}".events WHERE session_id = $2 AND seq < $3::bigint`

export interface ForkWrite {
  parentId: string
  meta: SessionMeta
  headerLine: string
  seedLength: number
  epoch: string
  host: string
}

/**
 * Creates the child's row and copies the parent's first `seedLength` lines in one transaction.
 * `E_EXISTS` when the child is stored already; `E_BAD_FORK_POINT` when the parent lost rows meanwhile.
 */
export async function forkSession(db: Db, schema: string, f: ForkWrite, path: string): Promise<void> {
  await db.transaction(async (client) => {
    const created = await client.query(INSERT_CHILD(schema), [
      f.meta.id,
      f.headerLine,
      f.meta.createdAt,
      f.seedLength,
      Buffer.byteLength(f.headerLine) + 1,
      f.parentId,
      f.epoch,
      f.host,
      process.pid,
    ])
    if (created.rowCount !== 1) {
      throw new SessionPersistenceError('E_EXISTS', `a log for session '${f.meta.id}' already exists`, {
        sessionId: f.meta.id,
        path,
      })
    }
    const copied = await client.query(COPY_SEED(schema), [f.meta.id, f.parentId, f.seedLength])
    if (copied.rowCount !== f.seedLength) {
      throw new SessionPersistenceError(
        'E_BAD_FORK_POINT',
        `session '${f.parentId}' no longer has ${f.seedLength} events to fork from`,
        { sessionId: f.parentId },
      )
    }
    await client.query('SELECT pg_notify($1, $2)', [changeChannel(schema), changePayload(f.meta.id)]) // delivered at COMMIT
  })
}

/**
 * After a COMMIT that created a session went unanswered (fork, importRaw): whether the row is
 * ours, i.e. carries our writer token and header line.
 */
export async function rowIsOurs(db: Db, schema: string, id: string, epoch: string, headerLine: string): Promise<boolean> {
  const { rows } = await db.query<{ ok: boolean }>(
    `SELECT writer_epoch = $2::bigint AND header_line = $3 AS ok FROM "${schema}".sessions WHERE session_id = $1`,
    [id, epoch, headerLine],
  )
  return rows[0]?.ok === true
}

// The parent's header, length, and the event just before the fork point, in one snapshot.
const FORK_POINT = (s: string) => `
  SELECT header_line, length::float8 AS length,
         (SELECT line FROM "${s}".events WHERE session_id = $1 AND seq = $2::bigint - 1) AS last
    FROM "${s}".sessions WHERE session_id = $1`

/**
 * The parent's header, once the fork point is checked (docs/contract.md §4.7): `seedLength` is 0
 * or ends just after a `turn/end`, and is not past the parent's end (`E_BAD_FORK_POINT`).
 */
export async function readForkPoint(db: Db, schema: string, parentId: string, seedLength: number, path: string): Promise<SessionHeader> {
  const parent = await readSnapshot(db, async (client) => {
    const { rows } = await client.query<{ header_line: string; length: number; last: string | null }>(FORK_POINT(schema), [
      parentId,
      seedLength,
    ])
    return rows[0]
  })
  if (!parent) throw notFound(parentId, path)
  const header = parseStoredHeader(parent.header_line, parentId, path)
  const last = parent.last === null ? undefined : parseEventLine(parent.last, seedLength - 1, path, parentId, header.version)
  if (seedLength > parent.length || (seedLength > 0 && last?.type !== 'turn/end')) {
    throw new SessionPersistenceError(
      'E_BAD_FORK_POINT',
      seedLength > parent.length
        ? `session '${parentId}' has ${parent.length} events; cannot fork at ${seedLength}`
        : `event ${seedLength - 1} of session '${parentId}' is not a turn/end; fork at 0 or just after a turn/end`,
      { sessionId: parentId, path },
    )
  }
  return header
}
