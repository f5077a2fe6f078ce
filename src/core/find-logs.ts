import { join } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import { logFileName } from './paths.js'
import type { StoreContext } from './store-context.js'

const errno = (err: unknown) => (err as NodeJS.ErrnoException).code

/** The buckets under the root: directories whose names do not start with `.` (SPEC 3.1). */
export async function listBuckets(ctx: StoreContext): Promise<string[]> {
  try {
    const entries = await ctx.fs.readdir(ctx.root)
    return entries.filter((e) => e.isDirectory && !e.name.startsWith('.')).map((e) => join(ctx.root, e.name))
  } catch (err) {
    if (errno(err) === 'ENOENT') return []
    throw err
  }
}

/** Every path under the root where a log of `id` exists (normally zero or one). */
export async function findLogs(ctx: StoreContext, id: string): Promise<string[]> {
  const name = logFileName(id)
  const buckets = await listBuckets(ctx)
  const found = await Promise.all(
    buckets.map(async (bucket) => {
      const path = join(bucket, name)
      try {
        return (await ctx.fs.stat(path)).isFile ? path : undefined
      } catch (err) {
        if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return undefined
        throw err
      }
    }),
  )
  return found.filter((p): p is string => p !== undefined)
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
