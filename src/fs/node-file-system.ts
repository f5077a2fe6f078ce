import { promises as fsp, stat as statCallback } from 'node:fs'
import type { DirEntry, FileHandle, FileStat, FileSystem } from './file-system.js'

function toStat(s: import('node:fs').Stats): FileStat {
  return { size: s.size, ino: s.ino, mtimeMs: s.mtimeMs, isDirectory: s.isDirectory(), isFile: s.isFile() }
}

class NodeFileHandle implements FileHandle {
  readonly #h: fsp.FileHandle
  constructor(h: fsp.FileHandle) {
    this.#h = h
  }
  async read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return (await this.#h.read(buffer, offset, length, position)).bytesRead
  }
  async write(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return (await this.#h.write(buffer, offset, length, position)).bytesWritten
  }
  sync(): Promise<void> {
    return this.#h.sync()
  }
  datasync(): Promise<void> {
    return this.#h.datasync()
  }
  truncate(length: number): Promise<void> {
    return this.#h.truncate(length)
  }
  async stat(): Promise<FileStat> {
    return toStat(await this.#h.stat())
  }
  chmod(mode: number): Promise<void> {
    return this.#h.chmod(mode)
  }
  close(): Promise<void> {
    return this.#h.close()
  }
}

/** The default seam: Node's promise-based `fs`, never a `*Sync` call. Stateless, so shared. */
export function createNodeFileSystem(): FileSystem {
  return NODE_FS
}

const NODE_FS: FileSystem = {
  async mkdir(path, mode) {
    await fsp.mkdir(path, { mode })
  },
  async open(path, flags, mode) {
    return new NodeFileHandle(await fsp.open(path, flags, mode))
  },
  link: (existingPath, newPath) => fsp.link(existingPath, newPath),
  unlink: (path) => fsp.unlink(path),
  async readdir(path): Promise<DirEntry[]> {
    const entries = await fsp.readdir(path, { withFileTypes: true })
    return entries.map((e) => ({ name: e.name, isDirectory: e.isDirectory(), isFile: e.isFile() }))
  },
  stat(path) {
    // The callback form: measured ~12 µs cheaper than fs.promises.stat, and the writer lock
    // stats its file before every append.
    return new Promise((resolve, reject) => statCallback(path, (err, s) => (err ? reject(err) : resolve(toStat(s)))))
  },
  chmod: (path, mode) => fsp.chmod(path, mode),
  rename: (oldPath, newPath) => fsp.rename(oldPath, newPath),
  utimes: (path, atime, mtime) => fsp.utimes(path, atime, mtime),
  readlink: (path) => fsp.readlink(path),
  async syncDir(path) {
    const h = await fsp.open(path, 'r')
    try {
      await h.sync()
    } catch (err) {
      // Windows cannot fsync a directory through Node (SPEC 5.1, 12); everywhere else it is fatal.
      if (!(process.platform === 'win32' && (err as NodeJS.ErrnoException).code === 'EPERM')) throw err
    } finally {
      await h.close()
    }
  },
}
