import { join } from 'node:path'
import { inEnsuredDir, writeAll } from '../durable.js'
import { errno } from '../errno.js'
import { tmpName } from '../paths.js'
import { FILE_MODE, type StoreContext } from '../store-context.js'
import type { LockOwner } from './lock-owner.js'

/** A lock or marker record written under a temporary name in the lock directory, not yet published. */
export interface RecordFile {
  readonly tmp: string
  /** The inode the record keeps once linked or renamed into place: how a holder knows it is still its own. */
  readonly ino: number
  /** Closes the descriptor (it may overlap with publishing). */
  close(): Promise<void>
  /** Removes the temporary name if it is still there. */
  discard(): Promise<void>
}

/**
 * Writes `record` to a fresh temporary file in `dir`. Lock files need not be durable: nothing
 * here is synced, and the directory's own creation is not synced either.
 */
export async function writeRecordFile(ctx: StoreContext, dir: string, record: LockOwner): Promise<RecordFile> {
  const tmp = join(dir, tmpName())
  const h = await inEnsuredDir(ctx, dir, { durable: false }, () => ctx.fs.open(tmp, 'wx', FILE_MODE))
  let ino: number
  try {
    const [st] = await Promise.all([h.stat(), writeAll(h, Buffer.from(`${JSON.stringify(record)}\n`), 0)])
    ino = st.ino
    // Created with 0600, the file can only have lost bits to the umask: chmod only then (or when
    // the seam cannot tell), and let the log's materialization know whether it must.
    const exact = st.mode !== undefined && (st.mode & 0o7777) === FILE_MODE // no setuid, setgid or sticky bit either
    ctx.createdFilesExact = exact
    if (!exact) await h.chmod(FILE_MODE)
  } catch (err) {
    await h.close().catch(() => {})
    await ctx.fs.unlink(tmp).catch(() => {})
    throw err
  }
  return {
    tmp,
    ino,
    close: () => h.close(),
    discard: () => ctx.fs.unlink(tmp).catch(() => {}),
  }
}

/** Links the record to `path`: true when published, false when a file of that name exists. */
export async function linkRecord(ctx: StoreContext, file: RecordFile, path: string): Promise<boolean> {
  try {
    await ctx.fs.link(file.tmp, path)
    return true
  } catch (err) {
    if (errno(err) === 'EEXIST') return false
    throw err
  }
}
