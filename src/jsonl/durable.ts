import { dirname, sep } from 'node:path'
import { errno } from './errno.js'
import type { FileHandle, OpenFlags } from './fs/file-system.js'
import { DIR_MODE, type StoreContext } from './store-context.js'

/** Writes the whole buffer at `position`, looping on short writes (write(2) may stop early). */
export async function writeAll(handle: FileHandle, buf: Buffer, position: number): Promise<void> {
  let done = 0
  while (done < buf.length) {
    const n = await handle.write(buf, done, buf.length - done, position + done)
    if (n <= 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' })
    done += n
  }
}

/** Makes a file's contents durable under the configured mode (after a truncate, or a plain write). */
export async function syncFile(ctx: StoreContext, handle: FileHandle): Promise<void> {
  if (ctx.sync === 'data') await handle.datasync()
  else if (ctx.sync === 'full') await handle.sync()
}

/** Makes bytes just written durable: nothing left to do when the log is open with O_DSYNC. */
export async function syncWritten(ctx: StoreContext, handle: FileHandle): Promise<void> {
  if (!ctx.dsyncWrites) await syncFile(ctx, handle)
}

/** How a log file is opened for writing: with O_DSYNC when the configuration asks for it. */
export function writeFlags(ctx: StoreContext, flags: 'r+' | 'wx'): OpenFlags {
  if (!ctx.dsyncWrites) return flags
  return flags === 'r+' ? 'r+dsync' : 'wxdsync'
}

/** Makes a directory's entries durable (no-op with `sync: 'none'`). */
export async function syncDir(ctx: StoreContext, path: string): Promise<void> {
  if (ctx.sync !== 'none') await ctx.fs.syncDir(path)
}

export interface EnsureDirOptions {
  /**
   * Whether the directory's entry must survive a power cut (buckets and the root). The lock
   * directory need not: a lock is never durable.
   */
  durable: boolean
}

/**
 * Creates `path` and any missing parents with mode 0700 (chmod'ed, whatever the umask), and,
 * when `durable`, makes sure its entry is durable before anything is published inside it: the
 * parent is synced whether this call created the directory or found it. Found is not enough:
 * the process that created it may not have synced its parent yet, and a power cut before it
 * does would take away a log this instance published and acknowledged in it. Inside the root,
 * the root's own entry is made durable the same way, once per instance.
 */
export async function ensureDir(ctx: StoreContext, path: string, options: EnsureDirOptions = { durable: true }): Promise<void> {
  if (ctx.knownDirs.has(path)) return
  const created = await makeDir(ctx, path)
  if (created) await ctx.fs.chmod(path, DIR_MODE)
  if (options.durable) {
    await syncParent(ctx, path, created)
    const parent = dirname(path)
    if (path !== ctx.root && isInside(ctx.root, parent)) await ensureDir(ctx, parent, options)
  }
  ctx.knownDirs.add(path)
}

/** Runs `create` in a directory made sure of first; if the directory vanished since, once more. */
export async function inEnsuredDir<T>(
  ctx: StoreContext,
  dir: string,
  options: EnsureDirOptions,
  create: () => Promise<T>,
): Promise<T> {
  await ensureDir(ctx, dir, options)
  try {
    return await create()
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw err
    ctx.knownDirs.delete(dir) // removed behind our back: make it again
    await ensureDir(ctx, dir, options)
    return create()
  }
}

/**
 * Syncs the directory holding `path`. The one directory outside the root, the root's parent,
 * may not be readable to us (a parent with only search permission): when the root was found
 * existing, its creator then answers for its entry, as it answers for the parents above.
 */
async function syncParent(ctx: StoreContext, path: string, created: boolean): Promise<void> {
  try {
    await syncDir(ctx, dirname(path))
  } catch (err) {
    const unreadable = errno(err) === 'EACCES' || errno(err) === 'EPERM'
    if (created || path !== ctx.root || !unreadable) throw err
  }
}

/** Whether `path` is `root` or below it. */
function isInside(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : `${root}${sep}`)
}

/** mkdir; true when this call created it, false when it existed. Missing parents are made durably. */
async function makeDir(ctx: StoreContext, path: string): Promise<boolean> {
  try {
    await ctx.fs.mkdir(path, DIR_MODE)
    return true
  } catch (err) {
    if (errno(err) === 'EEXIST') return false
    if (errno(err) !== 'ENOENT' || dirname(path) === path) throw err
  }
  await ensureDir(ctx, dirname(path), { durable: true })
  try {
    await ctx.fs.mkdir(path, DIR_MODE)
    return true
  } catch (again) {
    if (errno(again) === 'EEXIST') return false
    throw again
  }
}
