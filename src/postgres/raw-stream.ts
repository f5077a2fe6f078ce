import type { RawPageOptions, RawSessionStream } from '../persistence.js'
import { SessionPersistenceCorruptionError, SessionPersistenceError } from '../errors.js'
import { changeChannel, changePayload } from './change-feed.js'
import type { Db } from './db.js'
import { checkRawLine } from './import-raw.js'
import { PARTED_BYTES } from './line-parts.js'
import { LINE_OR_SIZE, notFound, parseEventLine, parseStoredHeader, partedSize, readHead, readPartedEvent, readSnapshot } from './read-session.js'
import { checkRawHeaderLine, rawPagesOnce, rawStreamPages } from '../session/raw-log.js'
import { parseRawPageOptions } from '../session/read-options.js'

// One page: from seq $2 on, at most $4 lines (below the length $3) and at most $5 bytes of
// them (but always the first: a longer line is a page of its own). The sizes are summed by the
// server over at most $4 rows of the primary key; the lines past the limit are never sent. A
// line of $6 bytes or more comes as its size (read-session.ts) and is read in parts, alone in
// its page (§15.5: never a whole row of it in node-postgres's receive buffer, never two).
//
// Only while the session's row is still the one the stream was opened on (incarnation $7, or
// NULL for a row older than schema version 4): a session deleted and created again under the id
// has rows there too, which must never be handed out under the first one's header. No row then,
// and the caller's look at the incarnation says why.
const PAGE = (s: string) => `
  SELECT ${LINE_OR_SIZE('$6')} AS line FROM (
    SELECT line, octet_length(line) AS size, sum(octet_length(line)) OVER (ORDER BY seq) AS upto
      FROM "${s}".events WHERE session_id = $1 AND seq >= $2::bigint AND seq < $3::bigint
       AND EXISTS (SELECT 1 FROM "${s}".sessions WHERE session_id = $1 AND incarnation IS NOT DISTINCT FROM $7::bigint)
     ORDER BY seq LIMIT $4
  ) page
   WHERE upto <= $5 OR upto = size`

// A line shorter than $3 bytes at seq $2: what a row that read as a size but was not there at
// that size in parts can be (a damaged short line of digits), never a huge line read whole.
const SHORT_LINE = (s: string) => `SELECT line FROM "${s}".events WHERE session_id = $1 AND seq = $2::bigint AND octet_length(line) < $3`

/**
 * `openRawStream` (§15.5): the header read and checked now, in one snapshot with the length;
 * the event lines then read page by page by the primary key, each page its own short query
 * (no connection is held between pages), each line checked as `readRaw` checks it (in the
 * header's format version; a version-1 line keeps its checksum: raw lines are the stored ones). The stream
 * ends at the length read when it was opened.
 */
export async function openRawStream(db: Db, schema: string, id: string, path: string, options: RawPageOptions = {}): Promise<RawSessionStream> {
  const { pageLines, pageBytes } = parseRawPageOptions(options)
  const opened = await readSnapshot(db, async (client) => ({
    head: await readHead(client, schema, id),
    incarnation: (await client.query<{ incarnation: string | null }>(INCARNATION(schema), [id])).rows[0]?.incarnation,
  }))
  const { head } = opened
  if (!head) throw notFound(id, path)
  // A stored header, judged as `readRaw` judges it (damage is E_CORRUPT, a foreign id too).
  if (head.headerLine.includes('\n')) throw new SessionPersistenceCorruptionError(1, 0, 'the header line holds a newline', { path, sessionId: id })
  const { version } = parseStoredHeader(head.headerLine, id, path)
  const { length } = head
  // No row where the length read at the start says there is one: the session was deleted (or
  // replaced) meanwhile, or the rows are missing while its row stays (damage).
  const missing = async (seq: number, reason: string): Promise<never> => {
    const now = (await db.query<{ incarnation: string | null }>(INCARNATION(schema), [id])).rows[0]
    if (!now || now.incarnation !== opened.incarnation) {
      throw new SessionPersistenceError('E_NOT_FOUND', `session '${id}' was deleted while it was read`, { sessionId: id, path })
    }
    throw new SessionPersistenceCorruptionError(seq + 2, -1, reason, { path, sessionId: id })
  }
  // The line at `seq` that its page gave as `size`, read in parts and checked as a line read whole is.
  const partedLine = async (seq: number, size: number): Promise<string> => {
    const read = await db.with((client) => readPartedEvent(client, { schema, id, path, version }, seq, size, true))
    // Its parts are read by (session, seq) in queries of their own: the row still the one the
    // stream was opened on afterwards means they were its (an incarnation never comes back).
    if (read) {
      const now = (await db.query<{ incarnation: string | null }>(INCARNATION(schema), [id])).rows[0]
      if (!now || now.incarnation !== opened.incarnation) await missing(seq, 'the row changed while it was read')
      return read.line!
    }
    // Not there at that size: a damaged short line that reads as a size (digits), judged as any
    // line is, or the session deleted or replaced since the page was read.
    const short = (await db.query<{ line: string }>(SHORT_LINE(schema), [id, seq, PARTED_BYTES])).rows[0]
    if (short) {
      parseEventLine(short.line, seq, path, id, version)
      return short.line // (digits are never a valid event line: parseEventLine throws)
    }
    return missing(seq, 'the row changed while it was read')
  }
  async function* eventPages(): AsyncGenerator<readonly string[]> {
    for (let next = 0; next < length; ) {
      const { rows } = await db.query<{ line: string }>(PAGE(schema), [id, next, length, pageLines, pageBytes, PARTED_BYTES, opened.incarnation ?? null])
      if (rows.length === 0) await missing(next, 'rows are missing below the stored length')
      // The lines before a damaged one are handed out first (a reader of the raw log sees what
      // precedes the damage, as on a directory root), then the damage is reported.
      const page: string[] = []
      let damage: unknown
      for (const [i, r] of rows.entries()) {
        const size = partedSize(r.line)
        if (size !== undefined) {
          // A huge line is a page of its own: the page ends before it, or is it.
          if (i > 0) break
          page.push(await partedLine(next, size))
          break
        }
        try {
          parseEventLine(r.line, next + i, path, id, version)
        } catch (err) {
          damage = err
          break
        }
        page.push(r.line)
      }
      next += page.length
      if (page.length > 0) yield page
      if (damage !== undefined) throw damage
    }
  }
  return { id, headerLine: head.headerLine, eventPages: rawPagesOnce(id, eventPages) }
}

// The row's incarnation (schema version 4): tells a session from one re-created under its id.
const INCARNATION = (s: string) => `SELECT incarnation::text AS incarnation FROM "${s}".sessions WHERE session_id = $1`

const INSERT_ROW = (s: string) => `
  INSERT INTO "${s}".sessions
    (session_id, header_line, created_at, length, size_bytes, writer_epoch, holder_host, holder_pid, holder_since)
  VALUES ($1, $2, $3::bigint, 0, $4::bigint, $5::bigint, $6, $7::integer, now())
  ON CONFLICT (session_id) DO NOTHING`

// The lines travel as one text split on "\n" by the server, as an append's do (a checked raw
// line holds no raw newline): cheaper to send than a text[] the driver quotes line by line.
const INSERT_PAGE = (s: string) => `
  INSERT INTO "${s}".events (session_id, seq, line, kind)
  SELECT $1, $2::bigint + u.ord - 1, u.line, u.kind
    FROM ROWS FROM (string_to_table($3::text, E'\\n'), unnest($4::smallint[])) WITH ORDINALITY AS u(line, kind, ord)`

/**
 * At most this many lines and bytes in one INSERT: a caller's page of any size (importRawStream
 * takes any stream; importRaw pages by lines only) goes in several, never one message near the
 * server's 1 GB limit. A longer line goes alone.
 */
const INSERT_LINES = 5_000
const INSERT_BYTES = 16 * 1024 * 1024

/** `page` cut into runs of at most INSERT_LINES lines and about INSERT_BYTES bytes. */
function* insertRuns(page: readonly string[]): Generator<{ from: number; lines: readonly string[]; bytes: number }> {
  let from = 0
  let bytes = 0
  for (let i = 0; i < page.length; i++) {
    const size = Buffer.byteLength(page[i]!) + 1
    if (i > from && (i - from >= INSERT_LINES || bytes + size > INSERT_BYTES)) {
      yield { from, lines: page.slice(from, i), bytes }
      from = i
      bytes = 0
    }
    bytes += size
  }
  if (page.length > from) yield { from, lines: page.slice(from), bytes }
}

const FINISH = (s: string) => `
  UPDATE "${s}".sessions SET length = $2::bigint, size_bytes = size_bytes + $3::bigint, updated_at = now() WHERE session_id = $1`

/**
 * `importRawStream` (§15.5), and `importRaw` as its special case: one transaction that creates
 * the session's row, then inserts each page as it arrives (one page held at a time, each line
 * checked by `checkRawLine`, or given its kind in `checked` when the caller checked the lines
 * already), and sets the row's length at the end. Until COMMIT no reader sees any of it; any
 * failure (a refused line, the source's rejection, the connection) rolls everything back.
 * `E_EXISTS` when the id is stored already. Run under the session's lock, with its writer token.
 */
export async function importRawStream(
  db: Db,
  schema: string,
  log: RawSessionStream,
  holder: { epoch: string; host: string },
  path: string,
  checked?: readonly number[],
): Promise<{ eventLines: number }> {
  const { createdAt, version } = checkRawHeaderLine(log.id, log.headerLine)
  const pages = rawStreamPages(log)
  return db.transaction(async (client) => {
    const created = await client.query(INSERT_ROW(schema), [
      log.id,
      log.headerLine,
      createdAt,
      Buffer.byteLength(log.headerLine) + 1,
      holder.epoch,
      holder.host,
      process.pid,
    ])
    if (created.rowCount !== 1) {
      throw new SessionPersistenceError('E_EXISTS', `a log for session '${log.id}' already exists`, { sessionId: log.id, path })
    }
    let count = 0
    let bytes = 0
    for await (const page of pages) {
      const kinds = checked?.slice(count, count + page.length) ?? page.map((line, i) => checkRawLine(line, count + i, log.id, path, version))
      for (const run of insertRuns(page as string[])) {
        const runKinds = kinds.slice(run.from, run.from + run.lines.length)
        await client.query(INSERT_PAGE(schema), [log.id, count + run.from, run.lines.join('\n'), `{${runKinds.join(',')}}`])
        bytes += run.bytes
      }
      count += page.length
    }
    await client.query(FINISH(schema), [log.id, count, bytes])
    await client.query('SELECT pg_notify($1, $2)', [changeChannel(schema), changePayload(log.id)]) // delivered at COMMIT
    return { eventLines: count }
  })
}
