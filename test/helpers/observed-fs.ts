import { createNodeFileSystem, type FileHandle, type FileSystem, type OpenFlags } from '../../src/index.js'

/**
 * The Node seam with its opens and reads reported: `onOpen` for every file opened, `onRead` for
 * every read with what it returned. Everything else is the Node seam's (spread, so a listing
 * goes log by log: the Node seam's `peekFiles` is not copied).
 */
export function observedFs(hooks: {
  onOpen?: (path: string, flags: OpenFlags) => void
  onRead?: (path: string, position: number, length: number, got: number) => void
}): FileSystem {
  const base = createNodeFileSystem()
  return {
    ...base,
    supportsDsync: base.supportsDsync,
    async open(path, flags, mode) {
      const h = await base.open(path, flags, mode)
      hooks.onOpen?.(path, flags)
      return withRead(h, async (buffer, offset, length, position) => {
        const got = await h.read(buffer, offset, length, position)
        hooks.onRead?.(path, position, length, got)
        return got
      })
    },
  }
}

/** `h` with its reads made by `read` (which may call `h.read`); every other call is `h`'s. */
export function withRead(h: FileHandle, read: FileHandle['read']): FileHandle {
  return {
    read,
    write: (...a) => h.write(...a),
    sync: () => h.sync(),
    datasync: () => h.datasync(),
    truncate: (n) => h.truncate(n),
    stat: () => h.stat(),
    chmod: (m) => h.chmod(m),
    close: () => h.close(),
  }
}
