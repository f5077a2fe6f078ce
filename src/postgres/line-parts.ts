import pg from 'pg'
import { crc32 } from 'node:zlib'

// A huge line travels in parts of PART_BYTES, both ways (§15.5): node-postgres copies a whole
// statement into one message buffer before sending it, and grows its receive buffer by doubling
// until a whole row fits, so a 64 MiB line sent or read in one piece costs one to three more
// copies of it in the process than the line itself.
//
// Out: the batch's bytes go into a large object of the statement's own transaction (lo_put, part
// by part), the statement takes its lines from there (`convert_from(lo_get(oid), 'UTF8')`, the
// same text the server would have decoded from a parameter), and the object is unlinked before
// COMMIT: all or nothing, as one statement. In: a load or read asks for lines of PARTED_BYTES or
// more by size only and fetches each such line afterwards in byte ranges of one server-side copy.

/** A batch's lines (joined by `\n`) of this many bytes or more are sent in parts. */
export const PARTED_BYTES = 1 << 20
/** The size of one part, sent or read. */
export const PART_BYTES = 1 << 20

/** Whether a batch's lines go to the server in parts. */
export function isParted(text: string | Buffer): text is Buffer {
  return typeof text !== 'string' && text.length >= PARTED_BYTES
}

/** `sql` with the lines parameter `$n::text` read from the large object whose oid `$n` is. */
export function fromLargeObject(sql: string, param: number): string {
  const from = `string_to_table($${param}::text,`
  if (!sql.includes(from)) throw new Error(`the statement takes no ${from}`) // a bug here, never input
  return sql.replace(from, `string_to_table(convert_from(lo_get($${param}::oid), 'UTF8'),`)
}

/**
 * Runs `statement(oid)` in a transaction on `client` after storing `bytes` in a new large object
 * of that transaction, part by part, and unlinks the object before it commits.
 */
export async function withStagedBytes<T>(client: pg.ClientBase, bytes: Buffer, statement: (oid: string) => Promise<T>): Promise<T> {
  const { rows } = await client.query<{ oid: string }>('SELECT lo_create(0)::text AS oid')
  const oid = rows[0]!.oid
  for (let at = 0; at < bytes.length; at += PART_BYTES) {
    await client.query('SELECT lo_put($1::oid, $2::bigint, $3::bytea)', [oid, at, bytes.subarray(at, at + PART_BYTES)])
  }
  const result = await statement(oid)
  await client.query('SELECT lo_unlink($1::oid)', [oid])
  return result
}

// One server-side copy of the line's bytes (MATERIALIZED: made once, not once a part), cut in
// byte ranges, each moved on to the next character's first byte (a UTF-8 continuation byte is
// 10xxxxxx; a stored text is valid UTF-8, so a character ends before the value does) and sent
// as text: a byte range is found at once (a character range only by walking the text from its
// start), and a part that is whole characters arrives as a string, with no bytes or hex text
// made of it in this process. One cut is where the kept tail starts ($4, moved on the same way);
// each part says whether it is of the tail.
const ON_CHARACTER = (p: string) =>
  `(${p} + CASE WHEN ${p} >= v.n THEN 0 WHEN get_byte(v.b, ${p}) & 192 <> 128 THEN 0
     WHEN ${p} + 1 >= v.n THEN 1 WHEN get_byte(v.b, ${p} + 1) & 192 <> 128 THEN 1
     WHEN ${p} + 2 >= v.n THEN 2 WHEN get_byte(v.b, ${p} + 2) & 192 <> 128 THEN 2 ELSE 3 END)`
// The row is taken only at the size it was seen at ($5, in the database's encoding): a row
// replaced meanwhile (a session deleted and created again, which a watcher's poll does not rule
// out) reads as gone. The kept tail is the last $4 bytes of the UTF-8 form, whatever the
// database's encoding.
const PARTS = (s: string) => `
  WITH v AS MATERIALIZED (
    SELECT b, octet_length(b) AS n FROM (
      SELECT convert_to(line, 'UTF8') AS b FROM "${s}".events WHERE session_id = $1 AND seq = $2::bigint AND octet_length(line) = $5::int
    ) AS x
  ), body AS (
    SELECT ${ON_CHARACTER('greatest(v.n - $4::int, 0)')} AS at FROM v
  ), cuts AS (
    SELECT 0 AS c UNION SELECT at FROM body UNION SELECT n FROM v
    UNION SELECT ${ON_CHARACTER('g')} FROM v, generate_series($3::int, v.n - 1, $3::int) AS g
  ), parts AS (
    SELECT c, lead(c) OVER (ORDER BY c) AS e FROM cuts
  )
  SELECT convert_from(substring(v.b FROM p.c + 1 FOR p.e - p.c), 'UTF8'), p.c >= body.at
    FROM parts AS p, v, body WHERE p.e IS NOT NULL ORDER BY p.c`

/** What reading a parted line gave: its text (the tail cut, see below) and its checksum. */
export interface PartedLine {
  /** The line's text less its last `keepBytes` bytes (given in `tail`), then `close`. */
  text: string
  /** The line's last `keepBytes` bytes as text (fewer when the line is shorter, or when they do not start a character). */
  tail: string
  /** CRC-32 of the line's bytes before the tail. */
  crc: number
  /** Whether the line holds a raw newline. */
  newline: boolean
}

/**
 * Reads the line at `seq` in parts (one query, its rows streamed, none kept): the parts before
 * the last `keepBytes` bytes are checksummed as they arrive (zlib's CRC-32 of a string is of
 * its UTF-8 bytes) and kept as text; the last `keepBytes` (a version-1 line's checksum field,
 * ASCII) come back apart and `close` ends the text instead, so the text is made once, never cut
 * or copied again. `size` is the line's size in bytes as the database stores it (`octet_length`);
 * `undefined` when there is no such row of that size.
 */
export function readPartedLine(
  client: pg.ClientBase,
  schema: string,
  id: string,
  seq: number,
  size: number,
  cutAtEnd: { keepBytes: number; close: string },
): Promise<PartedLine | undefined> {
  return new Promise((resolve, reject) => {
    const pieces: string[] = []
    let tail = ''
    let crc = 0
    let newline = false
    let rows = 0
    const query = new pg.Query({ text: PARTS(schema), values: [id, seq, PART_BYTES, cutAtEnd.keepBytes, size], rowMode: 'array' } as pg.QueryConfig)
    query.on('row', (row: [string, boolean]) => {
      const part = row[0]
      rows++
      if (part.includes('\n')) newline = true
      if (row[1]) tail += part
      else {
        crc = crc32(part, crc)
        pieces.push(part)
      }
    })
    query.on('error', reject)
    query.on('end', () => {
      if (rows === 0) return resolve(undefined)
      pieces.push(cutAtEnd.close)
      resolve({ text: pieces.join(''), tail, crc, newline })
    })
    void client.query(query)
  })
}
