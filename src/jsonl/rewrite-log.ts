import { dirname, join } from 'node:path'
import { syncDir, writeAll } from './durable.js'
import type { BodyWriter } from './materialize.js'
import { tmpName } from './paths.js'
import { FILE_MODE, type StoreContext } from './store-context.js'

/**
 * Writes a new file beside `path` from `body` and syncs it, without publishing it: resolves with
 * its path and size. On failure the file is removed.
 */
export async function writeBeside(ctx: StoreContext, path: string, body: BodyWriter, name = tmpName()): Promise<{ path: string; size: number }> {
  const out = join(dirname(path), name)
  const handle = await ctx.fs.open(out, 'wx', FILE_MODE)
  let size = 0
  try {
    await body(async (piece) => {
      await writeAll(handle, piece, size)
      size += piece.length
    })
    // Created 0600, it can only have lost bits to the umask: chmod before the sync carries it.
    await handle.chmod(FILE_MODE)
    if (ctx.sync !== 'none') await handle.sync() // fsync: the mode goes with the data
  } catch (err) {
    await handle.close().catch(() => {})
    await ctx.fs.unlink(out).catch(() => {})
    throw err
  }
  await handle.close()
  return { path: out, size }
}

/**
 * Replaces the log at `path` crash-safely (§16 migrate, redact, repair --truncate-at-damage):
 * the new contents go to a temporary file in the log's bucket, which is synced, renamed over the
 * log, and the bucket synced. A crash at any step leaves the whole old log or the whole new one;
 * a leftover temporary file is never listed. The caller holds the session's lock.
 */
export async function rewriteLog(ctx: StoreContext, path: string, body: BodyWriter, beforeRename?: () => Promise<void>): Promise<number> {
  const tmp = await writeBeside(ctx, path, body)
  try {
    // A writer lock lost while a long rewrite ran must replace nothing.
    await beforeRename?.()
    await ctx.fs.rename(tmp.path, path)
  } catch (err) {
    await ctx.fs.unlink(tmp.path).catch(() => {})
    throw err
  }
  await syncDir(ctx, dirname(path))
  return tmp.size
}
