import { createHash } from 'node:crypto'
import { SessionPersistenceError } from '../errors.js'
import { changeChannel, changePayload } from './change-feed.js'
import { backoff, type Db, isConnectionError } from './db.js'
import type { GroupCommit } from './group-commit.js'
import { fromLargeObject, isParted, PARTED_BYTES, withStagedBytes } from './line-parts.js'
import { lockedError, type SessionRow, toSessionRow } from './session-row.js'

// The first batch of a session publishes its row (header line, writer epoch) and its lines at once.
const CREATE = (s: string) => `
  WITH created AS (
    INSERT INTO "${s}".sessions
      (session_id, header_line, created_at, length, size_bytes, writer_epoch, holder_host, holder_pid, holder_since)
    VALUES ($1, $7, $8::bigint, $3::bigint + $4::bigint, $5::bigint, $2::bigint, $9, $10::integer, now())
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id
  ), inserted AS (
    INSERT INTO "${s}".events (session_id, seq, line, kind)
    SELECT created.session_id, $3::bigint + u.ord - 1, u.line, u.kind
      FROM created, ROWS FROM (string_to_table($6::text, E'\\n'), unnest($11::smallint[])) WITH ORDINALITY AS u(line, kind, ord)
     WHERE u.line IS NOT NULL
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM inserted)::integer AS n, pg_notify($12, $13) FROM created`

// Why a batch inserted nothing, and what is stored where it would have gone: each line as `l`
// and its text, or one of $4 bytes or more as `d` and the SHA-256 of its UTF-8 bytes (§15.5: a
// huge line is never fetched whole, and never quoted into a text[]).
const DIAGNOSE = (s: string) => `
  SELECT writer_epoch::text AS epoch, length::float8 AS length, header_line, holder_host, holder_pid, holder_since,
         ARRAY(SELECT CASE WHEN octet_length(e.line) < $4 THEN 'l' || e.line ELSE 'd' || encode(sha256(convert_to(e.line, 'UTF8')), 'hex') END
                 FROM "${s}".events e
                WHERE e.session_id = s.session_id AND e.seq >= $2::bigint AND e.seq < $3::bigint ORDER BY e.seq) AS lines
    FROM "${s}".sessions s WHERE session_id = $1`

/** Whether the lines DIAGNOSE gave (`l<line>` or `d<sha-256>`) are those of `text` (joined by `\n`). Exported for a test. */
export function sameLines(stored: readonly string[], text: string | Buffer): boolean {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text
  let at = 0
  for (const [i, entry] of stored.entries()) {
    const end = i === stored.length - 1 ? bytes.length : bytes.indexOf(0x0a, at)
    if (end < 0) return false
    const line = bytes.subarray(at, end)
    const same = entry.startsWith('l') ? line.equals(Buffer.from(entry.slice(1))) : createHash('sha256').update(line).digest('hex') === entry.slice(1)
    if (!same) return false
    at = end + 1
  }
  return at >= bytes.length
}

export interface Batch {
  sessionId: string
  /** The session's writer token: the batch is refused unless the row still carries it. */
  epoch: string
  /** Seq of the first line = the stored length the batch expects. */
  firstSeq: number
  /** How many lines. */
  count: number
  /**
   * The lines, joined by `\n` (none holds a raw newline: JSON.stringify escapes them): text, or
   * for a batch of a megabyte or more its UTF-8 bytes (sent as they are: a huge line is not held
   * again as text, §15.5).
   */
  text: string | Buffer
  /** Bytes the lines take in a JSONL file (each plus its `\n`). */
  bytes: number
  /**
   * The kind of each line (event-kinds.ts, 0 to 5). Without it the lines are stored with a NULL
   * kind, which the schema's trigger computes from each line (slower, same result).
   */
  kinds?: readonly number[]
  /** Set for the first batch of a new session: its row is created with it. */
  create?: { headerLine: string; createdAt: number; host: string }
}

/** The batch's kinds as an array literal (`{0,1,0}`; `{}` when unknown: the trigger fills them in). */
export function kindsLiteral(batch: Pick<Batch, 'kinds'>): string {
  return `{${batch.kinds?.join(',') ?? ''}}`
}

/** Whether two batches' lines are the same bytes (text or UTF-8 bytes, as `Batch.text` holds them). */
export function sameText(a: string | Buffer, b: string | Buffer): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a === b
  const x = typeof a === 'string' ? Buffer.from(a) : a
  const y = typeof b === 'string' ? Buffer.from(b) : b
  return x.equals(y)
}

/** Thrown when the connection kept failing until the deadline: the batch may or may not be stored. */
export class OutcomeUnknown extends SessionPersistenceError {
  constructor(batch: Batch, cause: unknown, path: string) {
    super(
      'E_IO',
      `session '${batch.sessionId}': the database could not be reached to store the batch at seq ${batch.firstSeq}; ` +
        'retry the same batch (it is never stored twice) or close and load the session',
      { sessionId: batch.sessionId, path, cause },
    )
  }
}

export type Stored = 'stored' | 'absent'

/**
 * Writes one batch durably (its statement commits with synchronous_commit on), retrying a
 * failed connection until `deadline`. After a connection failed the outcome of that attempt is
 * unknown; every retry is safe because the length check refuses a second copy, and a refusal is
 * then resolved by comparing what is stored at those seqs with the batch: ours, it is acknowledged.
 */
export async function appendBatch(
  db: Db,
  group: GroupCommit,
  schema: string,
  batch: Batch,
  options: { deadline: number; path: string; ambiguous?: boolean },
): Promise<void> {
  let ambiguous = options.ambiguous ?? false
  for (let attempt = 0; ; attempt++) {
    try {
      if (ambiguous && (await storedState(db, schema, batch, options.path)) === 'stored') return
      const { sessionId, epoch, firstSeq, count, bytes, create } = batch
      // A session's later batches share their statement with other sessions' (group-commit.ts).
      const values = (lines: string | Buffer) => [
        sessionId,
        epoch,
        firstSeq,
        count,
        bytes + Buffer.byteLength(create!.headerLine) + 1, // the new row's size counts its header line too
        lines, // split on "\n" by the server, as a group statement's
        create!.headerLine,
        create!.createdAt,
        create!.host,
        process.pid,
        kindsLiteral(batch),
        changeChannel(schema),
        changePayload(sessionId),
      ]
      const { text } = batch
      const inserted = create
        ? (
            isParted(text)
              ? await db.transaction((client) => withStagedBytes(client, text, (oid) => client.query<{ n: number }>(fromLargeObject(CREATE(schema), 6), values(oid))))
              : await db.query<{ n: number }>(CREATE(schema), values(text))
          ).rows[0]?.n === count
        : await group.submit(batch)
      if (inserted) return
      // Nothing was inserted: find out why (a unique violation cannot happen, the length check comes first).
      // Found stored, it is acknowledged even on a first attempt: an earlier attempt whose outcome
      // was unknown (found absent then) may have committed late, e.g. after waiting for a
      // synchronous standby, while this one waited for the session's row.
      if ((await storedState(db, schema, batch, options.path)) === 'stored') return
      throw new SessionPersistenceError('E_IO', `session '${sessionId}': the batch was refused for no known reason`, {
        sessionId,
        path: options.path,
      })
    } catch (err) {
      if (!isConnectionError(err)) throw err
      ambiguous = true
      if (Date.now() >= options.deadline) throw new OutcomeUnknown(batch, err, options.path)
      await backoff(attempt)
    }
  }
}

/**
 * Whether `batch` is stored (its exact lines at its seqs, and for a new session its header,
 * under its epoch or a later one). Throws the code that explains a refusal: `E_EXISTS`,
 * `E_LOCKED` (another writer took over), `E_NOT_FOUND` (deleted), `E_SEQ_NOT_CONTIGUOUS`.
 */
export async function storedState(db: Db, schema: string, batch: Batch, path: string): Promise<Stored> {
  const { sessionId: id, firstSeq, count, text } = batch
  const { rows } = await db.query<Parameters<typeof toSessionRow>[0] & { lines: string[] }>(DIAGNOSE(schema), [
    id,
    firstSeq,
    firstSeq + count,
    PARTED_BYTES,
  ])
  const raw = rows[0]
  if (!raw) {
    if (batch.create) return 'absent'
    throw new SessionPersistenceError('E_NOT_FOUND', `session '${id}' was deleted by another instance`, {
      sessionId: id,
      path,
    })
  }
  const row: SessionRow = toSessionRow(raw)
  // A new session's row is ours only if it carries our epoch (or a later one: a writer that took
  // it over after our batch committed). Another instance that created the same session with the
  // same lines first drew its epoch before ours: that row is not ours to acknowledge (E_EXISTS).
  const ours =
    raw.lines.length === count &&
    sameLines(raw.lines, text) &&
    (!batch.create || (row.headerLine === batch.create.headerLine && BigInt(row.epoch) >= BigInt(batch.epoch)))
  if (ours) return 'stored'
  if (batch.create) {
    if (row.epoch === batch.epoch) return 'absent'
    throw new SessionPersistenceError('E_EXISTS', `a log for session '${id}' already exists`, { sessionId: id, path })
  }
  if (row.epoch !== batch.epoch) throw lockedError(id, row, path, { lost: true })
  if (row.length !== firstSeq) {
    throw new SessionPersistenceError(
      'E_SEQ_NOT_CONTIGUOUS',
      `session '${id}': the batch starts at seq ${firstSeq}, the stored log continues at ${row.length}`,
      { sessionId: id, path },
    )
  }
  return 'absent'
}
