import { basename, join } from 'node:path'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../errors.js'
import type { ListProblem, SessionListing } from '../persistence.js'
import { decodeSessionId } from '../session/id-encoding.js'
import { listBuckets } from './find-logs.js'
import { metaFromHeader } from '../session/meta.js'
import { LOG_SUFFIX } from './paths.js'
import { forEachLine } from './read-lines.js'
import { parseHeaderLine } from './scan-log.js'
import type { SessionHeader } from '../session/schema.js'
import type { StoreContext } from './store-context.js'
import { listingOrder } from '../session/read-options.js'

/** A header line longer than this is refused in a listing (a real header is a few hundred bytes). */
const MAX_HEADER_BYTES = 1 << 20
/** One small block: enough for any ordinary header, so a listing reads one block per file. */
const HEADER_BLOCK = 4096

/** Reads only line 1 of a log (one 4 KiB block for any ordinary header). */
export async function readHeader(
  ctx: StoreContext,
  path: string,
  sessionId?: string,
  known?: { size: number; mtimeMs: number },
): Promise<{ header: SessionHeader; sizeBytes: number; mtimeMs: number }> {
  const handle = await ctx.fs.open(path, 'r')
  try {
    let header: SessionHeader | undefined
    let failure: unknown
    await forEachLine(
      handle,
      (buf, start, end, _offset, complete) => {
        try {
          header = parseHeaderLine(buf, start, end, complete, { path, sessionId })
        } catch (err) {
          failure = err
        }
        return false
      },
      { chunkBytes: HEADER_BLOCK, to: MAX_HEADER_BYTES },
    )
    if (failure) throw failure
    if (!header) throw new SessionPersistenceCorruptionError(1, 0, 'the file is empty: no header line', { path, sessionId })
    // A listing that stat'ed the logs already (by last write) needs no second stat.
    const st = known ?? (await handle.stat())
    return { header, sizeBytes: st.size, mtimeMs: st.mtimeMs }
  } finally {
    await handle.close()
  }
}

/**
 * One listing per materialized log with a valid header (docs/contract.md §4.6), newest first, then by id.
 * A bad file is reported and skipped, never fatal; temporary files are ignored. Ordered by last
 * write (§15.4), the logs are `stat`ed first and only the headers of the newest `limit` (and of
 * those reported as problems in their place) are read.
 */
export async function listSessions(
  ctx: StoreContext,
  onProblem: (problem: ListProblem) => void,
  order: { orderBy: 'createdAt' | 'lastWrite'; limit: number | undefined } = { orderBy: 'createdAt', limit: undefined },
): Promise<SessionListing[]> {
  const report = (path: string, err: unknown) =>
    onProblem({
      path,
      code: isSessionPersistenceError(err) ? err.code : 'E_IO',
      message: err instanceof Error ? err.message : String(err),
    })
  const files: { path: string; id: string; size?: number; mtimeMs?: number }[] = []
  for (const bucket of await listBuckets(ctx)) {
    let entries
    try {
      entries = await ctx.fs.readdir(bucket)
    } catch (err) {
      report(bucket, err)
      continue
    }
    for (const entry of entries) {
      if (entry.name.startsWith('.') || !entry.name.endsWith(LOG_SUFFIX)) continue
      const path = join(bucket, entry.name)
      const id = decodeSessionId(basename(entry.name, LOG_SUFFIX))
      if (id === undefined) {
        onProblem({ path, code: 'E_CORRUPT', message: `${path}: the file name is not an encoded session id` })
        continue
      }
      files.push({ path, id })
    }
  }
  const listings: SessionListing[] = []
  const readOne = async ({ path, id, size, mtimeMs: m }: { path: string; id: string; size?: number; mtimeMs?: number }) => {
    try {
      const { header, sizeBytes, mtimeMs } = await readHeader(ctx, path, id, size !== undefined && m !== undefined ? { size, mtimeMs: m } : undefined)
      listings.push({ meta: metaFromHeader(header), location: { kind: 'jsonl', path }, sizeBytes, mtimeMs })
    } catch (err) {
      report(path, err)
    }
  }
  const sorted = (all: SessionListing[]) => all.sort(listingOrder(order.orderBy))
  if (order.orderBy === 'createdAt') {
    // createdAt is in the header: every header is read, then the first `limit` kept.
    await eachConcurrently(files, readOne)
    return order.limit === undefined ? sorted(listings) : sorted(listings).slice(0, order.limit)
  }
  // Last write first: one stat per log, then headers in that order until `limit` are good.
  await eachConcurrently(files, async (f) => {
    try {
      const st = await ctx.fs.stat(f.path)
      f.size = st.size
      f.mtimeMs = st.mtimeMs
    } catch (err) {
      report(f.path, err)
    }
  })
  const candidates = files
    .filter((f): f is typeof f & { mtimeMs: number } => f.mtimeMs !== undefined)
    .sort((a, b) => b.mtimeMs - a.mtimeMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const limit = order.limit ?? candidates.length
  let next = 0
  while (listings.length < limit && next < candidates.length) {
    const batch = candidates.slice(next, next + (limit - listings.length))
    next += batch.length
    await eachConcurrently(batch, readOne)
  }
  return sorted(listings)
}

/** How many file-system calls a listing keeps in flight (the thread pool queues the rest). */
const CONCURRENCY = 32

/**
 * Runs `job` on every item, CONCURRENCY at a time: a fixed set of workers taking the next item
 * (a listing of 100,000 logs spent a third of its time in a queue's bookkeeping per job).
 */
async function eachConcurrently<T>(items: readonly T[], job: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) await job(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, items.length) }, worker))
}
