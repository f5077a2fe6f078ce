import { join } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import { errno } from './errno.js'
import { logFileName } from './paths.js'
import type { StoreContext } from './store-context.js'


/** The buckets under the root: directories whose names do not start with `.` (docs/contract.md §3.1). */
export async function listBuckets(ctx: StoreContext): Promise<string[]> {
  try {
    const entries = await ctx.fs.readdir(ctx.root)
    return entries.filter((e) => e.isDirectory && !e.name.startsWith('.')).map((e) => join(ctx.root, e.name))
  } catch (err) {
    if (errno(err) === 'ENOENT') return []
    throw err
  }
}

/**
 * Every path under the root where a log of `id` exists (normally zero or one). `likely` is the
 * path the caller would publish the log at: its bucket is known without listing the root, so it
 * is looked at while the root is listed (one thread-pool trip less per lookup). A log found
 * there counts even when its bucket appeared after the listing.
 *
 * A bucket this process may not search (`EACCES`, `EPERM`: a root that is a mount point holds
 * `lost+found`, root's and 0700) holds no log of ours as far as this look-up can tell: it counts
 * as absent, as `list` skips it, with one warning per bucket through the logger (docs/decisions.md).
 * Only `likely`'s own bucket, where the caller is about to read or write, still fails.
 */
export async function findLogs(ctx: StoreContext, id: string, likely?: string): Promise<string[]> {
  const name = logFileName(id)
  const early = likely === undefined ? undefined : isLogAt(ctx, likely)
  early?.catch(() => {}) // awaited below, unless listing the root fails first
  const buckets = await listBuckets(ctx)
  const paths = buckets.map((bucket) => join(bucket, name))
  const found = await Promise.all(
    paths.map((path, i) => (path === likely && early ? early : isLogAt(ctx, path).catch((err) => unsearchable(ctx, buckets[i]!, err)))),
  )
  const logs = paths.filter((_, i) => found[i])
  if (likely !== undefined && early && !paths.includes(likely) && (await early)) logs.push(likely)
  return logs
}

async function isLogAt(ctx: StoreContext, path: string): Promise<boolean> {
  try {
    return (await ctx.fs.stat(path)).isFile
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return false
    throw err
  }
}

/** Buckets already warned about, per store: a look-up per id must not repeat the warning. */
const warned = new WeakMap<StoreContext, Set<string>>()

/** False (no log there) for a bucket this process may not search, warning once; rethrows anything else. */
function unsearchable(ctx: StoreContext, bucket: string, err: unknown): false {
  const code = errno(err)
  if (code !== 'EACCES' && code !== 'EPERM') throw err
  let seen = warned.get(ctx)
  if (!seen) warned.set(ctx, (seen = new Set()))
  if (!seen.has(bucket)) {
    seen.add(bucket)
    ctx.logger.warn(`skipped ${bucket} when looking up sessions: ${code}, this process may not search it (it holds no session it can use)`, err)
  }
  return false
}

/** The one log of `id`: `E_NOT_FOUND` when there is none, `E_AMBIGUOUS` when there are several. */
export async function findOneLog(ctx: StoreContext, id: string): Promise<string> {
  const paths = await findLogs(ctx, id)
  const [first] = paths
  if (first === undefined) {
    throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}' under ${ctx.root}`, { sessionId: id })
  }
  if (paths.length > 1) {
    throw new SessionPersistenceError(
      'E_AMBIGUOUS',
      `session '${id}' exists in ${paths.length} buckets: ${paths.join(', ')}`,
      { sessionId: id, path: first },
    )
  }
  return first
}
