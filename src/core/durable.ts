import { dirname } from 'node:path'
import type { FileHandle } from '../fs/file-system.js'
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

/** Makes a file's written bytes durable under the configured mode. */
export async function syncFile(ctx: StoreContext, handle: FileHandle): Promise<void> {
  if (ctx.sync === 'data') await handle.datasync()
  else if (ctx.sync === 'full') await handle.sync()
}

/** Makes a directory's entries durable (no-op with `sync: 'none'`). */
export async function syncDir(ctx: StoreContext, path: string): Promise<void> {
  if (ctx.sync !== 'none') await ctx.fs.syncDir(path)
}

/**
 * Creates `path` and any missing parents with mode 0700 (chmod'ed, whatever the umask), and
 * syncs the parent of every directory it created so the new entry survives a power cut —
 * except the leaf's parent when `durable` is false (the lock directory need not survive).
 */
export async function ensureDir(ctx: StoreContext, path: string, durable = true): Promise<void> {
  if (ctx.knownDirs.has(path)) return
  await makeDir(ctx, path, durable)
  ctx.knownDirs.add(path)
}

/** Runs `create` in a directory made sure of first; if the directory vanished since, once more. */
export async function inEnsuredDir<T>(ctx: StoreContext, dir: string, durable: boolean, create: () => Promise<T>): Promise<T> {
  await ensureDir(ctx, dir, durable)
  try {
    return await create()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    ctx.knownDirs.delete(dir) // removed behind our back: make it again
    await ensureDir(ctx, dir, durable)
    return create()
  }
}

async function makeDir(ctx: StoreContext, path: string, durable: boolean): Promise<void> {
  try {
    await ctx.fs.mkdir(path, DIR_MODE)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EEXIST') return
    if (code !== 'ENOENT' || dirname(path) === path) throw err
    await makeDir(ctx, dirname(path), true)
    try {
      await ctx.fs.mkdir(path, DIR_MODE)
    } catch (again) {
      if ((again as NodeJS.ErrnoException).code === 'EEXIST') return
      throw again
    }
  }
  await ctx.fs.chmod(path, DIR_MODE)
  if (durable) await syncDir(ctx, dirname(path))
}
