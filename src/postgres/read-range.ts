import { metaFromHeader } from '../session/meta.js'
import { type ParsedRange, rangeBounds } from '../session/read-options.js'
import type { SessionRange } from '../persistence.js'
import type { Db } from './db.js'
import { notFound, parseStoredHeader, readEvents, readHead, readSnapshot } from './read-session.js'

/**
 * `read` (§15.2): the session's row (header, length), then the asked-for slice of its lines by
 * the primary key `(session_id, seq)`: an index range scan that starts at the range's first seq,
 * so a page costs the same at any depth of any log. One read-only snapshot, no lock: a session
 * being written is read as of one commit. `length` is the stored event count.
 */
export async function readRange(db: Db, schema: string, id: string, range: ParsedRange, path: string): Promise<SessionRange> {
  return readSnapshot(db, async (client) => {
    const head = await readHead(client, schema, id)
    if (!head) throw notFound(id, path)
    const { from, to } = rangeBounds(range, head.length)
    const header = parseStoredHeader(head.headerLine, id, path)
    const meta = metaFromHeader(header)
    const { events } = await readEvents(client, schema, id, path, from, to, header.version)
    return { meta, events, firstSeq: from, length: head.length }
  })
}
