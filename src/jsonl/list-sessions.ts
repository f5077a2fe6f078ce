import { SessionPersistenceCorruptionError } from '../errors.js'
import type { ListProblem, SessionListing } from '../persistence.js'
import { listBuckets } from './find-logs.js'
import { FoundLogs, type ListedFile, reportProblem } from './found-logs.js'
import { metaFromHeader } from '../session/meta.js'
import { readHeaderLine } from './read-session.js'
import { judgeHeader, parseHeaderLine } from '../session/header-line.js'
import { copySealedHead } from '../session/sealed-head.js'
import { sortByKeyDescending } from '../session/sort-by-key.js'
import type { SessionHeader } from '../session/schema.js'
import type { PeekedBatch, PeekedFile, PeekOptions } from './fs/file-system.js'
import { notRegularFile } from './errno.js'
import type { StoreContext } from './store-context.js'

/** Reads only line 1 of a log (one 4 KiB block for any ordinary header), and its size and mtime. */
export async function readHeader(
  ctx: StoreContext,
  path: string,
  sessionId?: string,
  known?: { size: number; mtimeMs: number },
): Promise<{ header: SessionHeader; sizeBytes: number; mtimeMs: number }> {
  const handle = await ctx.fs.open(path, 'r')
  try {
    // A listing that stat'ed the logs already (by last write, and refused FIFOs, sockets and
    // devices) needs no second stat. The stat comes first: a FIFO or a device is never read (a
    // directory fails its read, EISDIR, as it always did).
    let st = known
    if (!st) {
      const fresh = await handle.stat()
      if (!fresh.isFile && !fresh.isDirectory) throw notRegularFile(path, fresh)
      st = fresh
    }
    const { header } = await readHeaderLine(handle, path, sessionId)
    return { header, sizeBytes: st.size, mtimeMs: st.mtimeMs }
  } finally {
    await handle.close()
  }
}

/** One small block: enough for any ordinary header, so a listing reads one block per file. */
const HEADER_BLOCK = 4096

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
  const report = (path: string, err: unknown) => reportProblem(onProblem, path, err)
  // With a seam that reads many files at once, its threads start on the first logs found while
  // the other buckets are read (found-logs.ts); else every bucket is read first.
  const found = new FoundLogs(ctx, await listBuckets(ctx), onProblem)
  await found.readUntil(ctx.fs.peekFiles && ctx.fs.peekChunks === true ? PEEK_MIN_FILES : Number.POSITIVE_INFINITY)
  const files = found.files
  const listings: SessionListing[] = []
  const listed = (header: SessionHeader, path: string, sizeBytes: number, mtimeMs: number) =>
    listings.push({ meta: metaFromHeader(header), location: { kind: 'jsonl', path }, sizeBytes, mtimeMs })
  const readOne = async ({ path, id, size, mtimeMs: m }: ListedFile) => {
    try {
      const { header, sizeBytes, mtimeMs } = await readHeader(ctx, path, id, size !== undefined && m !== undefined ? { size, mtimeMs: m } : undefined)
      listed(header, path, sizeBytes, mtimeMs)
    } catch (err) {
      report(path, err)
    }
  }
  // The order of §4.6 or §15.4 (read-options.ts `listingOrder`: newest first, then by id), then by
  // path: one id in two buckets (§3.1) is listed twice, in an order that does not depend on which
  // header read finished first.
  const pathOf = (l: SessionListing) => (l.location as { path: string }).path
  const byIdThenPath = (a: SessionListing, b: SessionListing) => idThenPath(a.meta.id, pathOf(a), b.meta.id, pathOf(b))
  const newestKey = order.orderBy === 'lastWrite' ? (l: SessionListing) => l.mtimeMs : (l: SessionListing) => l.meta.createdAt
  const sorted = (all: SessionListing[]) => sortByKeyDescending(all, newestKey, byIdThenPath)
  if (order.orderBy === 'createdAt') {
    // createdAt is in the header: every header is read, then the first `limit` kept.
    await peekOrEach(
      ctx,
      found,
      HEADER_BLOCK,
      readOne,
      (f, peeked) => {
        if (peeked.error) return report(f.path, peeked.error)
        // A header longer than one block (never written by the package) is read as one by one.
        if (peeked.headEnd === undefined || peeked.headEnd === 'more' || peeked.head === undefined) return readOne(f)
        try {
          listed(headerFromPeek(peeked.head, peeked.headEnd, f), f.path, peeked.size, peeked.mtimeMs)
        } catch (err) {
          report(f.path, err)
        }
      },
      // Version-1 headers whose checksum the reading thread checked: parsed a batch at a time.
      {
        join: copySealedHead,
        visit: (f, peeked, value) => {
          try {
            listed(judgeHeader(value, true, { path: f.path, sessionId: f.id }), f.path, peeked.size, peeked.mtimeMs)
          } catch (err) {
            report(f.path, err)
          }
        },
      },
    )
    return order.limit === undefined ? sorted(listings) : sorted(listings).slice(0, order.limit)
  }
  // Last write first: one stat per log, then headers in that order until `limit` are good.
  const statOne = async (f: ListedFile) => {
    try {
      const st = await ctx.fs.stat(f.path)
      if (!st.isFile && !st.isDirectory) throw notRegularFile(f.path, st)
      f.size = st.size
      f.mtimeMs = st.mtimeMs
    } catch (err) {
      report(f.path, err)
    }
  }
  await peekOrEach(ctx, found, 0, statOne, (f, peeked) => {
    if (peeked.error) return report(f.path, peeked.error)
    f.size = peeked.size
    f.mtimeMs = peeked.mtimeMs
  })
  const stated = files.filter((f): f is StatedFile => f.mtimeMs !== undefined)
  const limit = order.limit ?? stated.length
  // A picker's newest `limit` first, picked in one pass; the rest sorted only if a header among
  // them is bad and more are needed (a sort of 100,000 logs costs more than the picker's reads).
  // A large limit is sorted: the pass keeps its pick sorted by insertion, O(logs × limit).
  let candidates = limit <= PICK_MAX && limit < stated.length ? newestOf(stated, limit) : stated.sort(newestFirst)
  let next = 0
  while (listings.length < limit && next < stated.length) {
    if (next === candidates.length) candidates = stated.sort(newestFirst) // its first `next` are those read
    const batch = candidates.slice(next, next + (limit - listings.length))
    next += batch.length
    await eachConcurrently(batch, readOne)
  }
  return sorted(listings)
}

type StatedFile = ListedFile & { mtimeMs: number }

/**
 * Up to this limit the newest are picked in one pass; above it, sorted. At 100,000 logs the pass
 * with this limit takes 1–7 ms (logs in random or ascending order), a sort about 30 ms.
 */
const PICK_MAX = 1024

/** Newest first, then by id; by path between logs of one id in two buckets: a total order. */
function newestFirst(a: StatedFile, b: StatedFile): number {
  return b.mtimeMs - a.mtimeMs || idThenPath(a.id, a.path, b.id, b.path)
}

/** Two logs' order after their key: by id, then by path (one id in two buckets, §3.1). */
function idThenPath(aId: string, aPath: string, bId: string, bPath: string): number {
  return aId < bId ? -1 : aId > bId ? 1 : aPath < bPath ? -1 : aPath > bPath ? 1 : 0
}

/** The first `k` of `files` in `newestFirst` order, in that order: one pass, `k` kept. */
function newestOf(files: readonly StatedFile[], k: number): StatedFile[] {
  const top: StatedFile[] = []
  if (k <= 0) return top
  for (const f of files) {
    if (top.length === k && newestFirst(f, top[k - 1]!) >= 0) continue
    let lo = 0
    let hi = top.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (newestFirst(top[mid]!, f) <= 0) lo = mid + 1
      else hi = mid
    }
    top.splice(lo, 0, f)
    if (top.length > k) top.pop()
  }
  return top
}

/** The header of a first line `peekFiles` gave, judged as `readHeader` judges it. */
function headerFromPeek(head: Buffer, end: 'line' | 'eof', f: ListedFile): SessionHeader {
  const context = { path: f.path, sessionId: f.id }
  if (end === 'eof' && head.length === 0) throw new SessionPersistenceCorruptionError(1, 0, 'the file is empty: no header line', context)
  return parseHeaderLine(head, 0, head.length, end === 'line', context)
}

/**
 * Below this many logs a listing looks at them one by one: a worker of `peekFiles` takes about
 * 20 ms to start, what 32 calls at a time spend on ~1,000 logs.
 */
export const PEEK_MIN_FILES = 2048

/**
 * Visits every file: through the seam's `peekFiles` when it has one and there are many files
 * (`visit` with what it saw), else `one` at a time (CONCURRENCY in flight). If `peekFiles`
 * fails midway (its worker could not start or died), the files it did not hand over go through
 * `one`: a listing never fails because of the fast path.
 */
async function peekOrEach(
  ctx: StoreContext,
  found: FoundLogs,
  headBytes: number,
  one: (f: ListedFile) => Promise<void>,
  visit: (f: ListedFile, peeked: PeekedFile) => Promise<void> | void,
  joined?: { join: NonNullable<PeekOptions['join']>; visit: (f: ListedFile, peeked: PeekedFile, value: unknown) => void },
): Promise<void> {
  const files = found.files
  if (!ctx.fs.peekFiles || files.length < PEEK_MIN_FILES) {
    await found.finish()
    return eachConcurrently(files, one)
  }
  // The logs found so far, then the rest as the buckets are read (all of them if all are read).
  const paths = found.complete ? files.map((f) => f.path) : found.paths()
  const options: PeekOptions = { expectedFiles: found.expected, ...(joined ? { join: joined.join } : {}) }
  const batches = ctx.fs.peekFiles(paths, headBytes, options)[Symbol.asyncIterator]()
  let done = 0
  const oneByOne = async (err: unknown) => {
    await found.finish()
    ctx.logger.warn(`listing ${files.length - done} logs one by one: ${err instanceof Error ? err.message : String(err)}`, err)
    return eachConcurrently(files.slice(done), one)
  }
  try {
    for (;;) {
      let next: IteratorResult<PeekedBatch>
      try {
        next = await batches.next()
      } catch (err) {
        return await oneByOne(err)
      }
      if (next.done) {
        await found.finish()
        // A seam that ended before every file (one that stopped early, or read a chunked list
        // as none): the rest go one by one, never left out.
        if (done < files.length) return await oneByOne(new Error(`peekFiles ended after ${done} of ${files.length} logs`))
        return
      }
      const { start, files: peeked, joined: lines } = next.value
      // The lines the seam joined: one value each, or (one of them no JSON) read again one by one.
      const values = lines ? parseJoined(lines.bytes, lines.count) : undefined
      let k = 0
      const slow: Promise<void>[] = []
      for (let i = 0; i < peeked.length; i++) {
        if (lines?.taken[i] === 1) {
          if (values && joined) joined.visit(files[start + i]!, peeked[i]!, values[k])
          else slow.push(one(files[start + i]!))
          k++
          continue
        }
        const later = visit(files[start + i]!, peeked[i]!)
        if (later) slow.push(later)
      }
      await Promise.all(slow)
      done = start + peeked.length
    }
  } catch (err) {
    found.stop() // the listing fails: the buckets not read yet are left alone
    throw err
  } finally {
    await batches.return?.()
  }
}

/** The values of a `PeekedBatch.joined` array of `count` lines, or undefined when it is no such array. */
function parseJoined(bytes: Buffer, count: number): unknown[] | undefined {
  try {
    const values: unknown = JSON.parse(bytes.toString('utf8'))
    return Array.isArray(values) && values.length === count ? values : undefined
  } catch {
    return undefined
  }
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
