import { dirname, join } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import type { FileHandle } from './fs/file-system.js'
import { inEnsuredDir, syncDir, syncWritten, writeAll, writeFlags } from './durable.js'
import { errno } from './errno.js'
import { tmpName } from './paths.js'
import { FILE_MODE, type StoreContext } from './store-context.js'

const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV'])

/**
 * Publishes a new log atomically (docs/contract.md §5.1): write `bytes` to a unique temporary file, sync it,
 * `link()` it to `finalPath` (never overwriting), unlink the temporary name, sync the bucket.
 * `beforeLink` is awaited just before the link: the caller takes the writer lock and re-checks
 * the other buckets meanwhile, overlapping with the write and sync of the temporary file.
 * Resolves with the open handle of the published file, positioned nowhere (callers use offsets).
 */
/** Writes a log's body piece by piece through `write` (a log too large to hold at once, §15.5). */
export type BodyWriter = (write: (piece: Buffer) => Promise<void>) => Promise<void>

export async function materialize(
  ctx: StoreContext,
  finalPath: string,
  bytes: Buffer | BodyWriter,
  details: { sessionId: string; beforeLink?: () => Promise<void> },
): Promise<FileHandle> {
  const bucket = dirname(finalPath)
  const tmp = join(bucket, tmpName())
  const handle = await inEnsuredDir(ctx, bucket, { durable: true }, () => ctx.fs.open(tmp, writeFlags(ctx, 'wx'), FILE_MODE))
  let linked = false
  try {
    if (Buffer.isBuffer(bytes)) await writeAll(handle, bytes, 0)
    else {
      let at = 0
      await bytes(async (piece) => {
        await writeAll(handle, piece, at)
        at += piece.length
      })
    }
    await syncWritten(ctx, handle)
    await details.beforeLink?.()
    // Created with 0600, the file can only have lost bits to the umask. The lock record this
    // session's writer lock was just written with (same process, same umask) shows whether it
    // did: chmod only then, or when that is not known, and always before the log is published.
    // A chmod after the sync is synced itself (fsync: fdatasync need not carry the mode), so a
    // crash cannot bring the log back with the umask's mode.
    if (ctx.createdFilesExact !== true) {
      await handle.chmod(FILE_MODE)
      if (ctx.sync !== 'none') await handle.sync()
    }
    try {
      await ctx.fs.link(tmp, finalPath)
      linked = true
    } catch (err) {
      const code = errno(err)
      if (code === 'EEXIST') {
        throw new SessionPersistenceError('E_EXISTS', `a log for session '${details.sessionId}' already exists`, {
          sessionId: details.sessionId,
          path: finalPath,
          cause: err,
        })
      }
      if (code !== undefined && NO_HARD_LINKS.has(code)) {
        throw new SessionPersistenceError(
          'E_LINK_UNSUPPORTED',
          `the file system of ${ctx.root} cannot make hard links (${code}); session logs need them`,
          { sessionId: details.sessionId, path: ctx.root, cause: err },
        )
      }
      throw err
    }
    await ctx.fs.unlink(tmp)
    await syncDir(ctx, bucket)
    return handle
  } catch (err) {
    await handle.close().catch(() => {})
    await ctx.fs.unlink(tmp).catch(() => {})
    // Published but not made durable: take the name back, so a retry starts from nothing.
    if (linked) {
      try {
        await ctx.fs.unlink(finalPath)
      } catch (undoError) {
        throw Object.assign(new AggregateError([err, undoError], 'materialization could not be undone'), {
          published: true,
        })
      }
    }
    throw err
  }
}
