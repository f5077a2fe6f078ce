import type { SessionMeta } from '../core/schema.js'
import { SessionPersistenceError } from '../errors.js'
import type { Db } from './db.js'

// The seed is copied inside the database: the parent's lines never travel to the client.
const INSERT_CHILD = (s: string) => `
  INSERT INTO "${s}".sessions
    (session_id, header_line, created_at, length, size_bytes, writer_epoch, holder_host, holder_pid, holder_since)
  SELECT $1, $2, $3::bigint, $4::bigint,
         $5::bigint + (SELECT coalesce(sum(octet_length(line) + 1), 0) FROM "${s}".events WHERE session_id = $6 AND seq < $4::bigint),
         $7::bigint, $8, $9::integer, now()
  ON CONFLICT (session_id) DO NOTHING`

const COPY_SEED = (s: string) => `
  INSERT INTO "${s}".events (session_id, seq, line)
  SELECT $1, seq, line FROM "${s}".events WHERE session_id = $2 AND seq < $3::bigint`

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
