import {
  close as closeCallback,
  constants,
  fchmod,
  fdatasync,
  fstat,
  fsync,
  ftruncate,
  link as linkCallback,
  promises as fsp,
  open as openCallback,
  read as readCallback,
  readdir as readdirCallback,
  stat as statCallback,
  unlink as unlinkCallback,
  watch,
  write as writeCallback,
} from 'node:fs'
import { errno } from '../errno.js'
import type { DirEntry, FileHandle, FileStat, FileSystem, OpenFlags } from './file-system.js'
import { peekFilesInWorker } from './peek-files.js'

function toStat(s: import('node:fs').Stats): FileStat {
  return { size: s.size, ino: s.ino, mtimeMs: s.mtimeMs, isDirectory: s.isDirectory(), isFile: s.isFile(), mode: s.mode }
}

type Done<T> = (err: NodeJS.ErrnoException | null, value: T) => void

function closedError(syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`EBADF: file handle already closed, ${syscall}`), { code: 'EBADF', errno: -9, syscall })
}

/**
 * An open file as a descriptor driven through Node's callback API. Every call still runs on
 * libuv's thread pool, so nothing blocks the event loop; `fs.promises.FileHandle` adds a
 * promise and a reference count around each call, which measured ~20–60 µs per write + sync
 * pair on the append path (docs/decisions.md). What FileHandle's reference count protects
 * against is kept: `close` waits for the calls in flight, and a call after `close` rejects
 * `EBADF` instead of reaching a descriptor number the process may have reused.
 */
class NodeFileHandle implements FileHandle {
  #fd: number
  #inFlight = 0
  #drained: (() => void) | undefined
  #closed: Promise<void> | undefined

  constructor(fd: number) {
    this.#fd = fd
  }

  #call<T>(syscall: string, start: (fd: number, done: Done<T>) => void): Promise<T> {
    const fd = this.#fd
    if (fd < 0) return Promise.reject(closedError(syscall))
    this.#inFlight++
    return new Promise<T>((resolve, reject) => {
      const settle: Done<T> = (err, value) => {
        if (--this.#inFlight === 0) this.#drained?.()
        if (err) reject(err)
        else resolve(value)
      }
      try {
        start(fd, settle)
      } catch (err) {
        settle(err as NodeJS.ErrnoException, undefined as never) // Node refused the arguments
      }
    })
  }

  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return this.#call('read', (fd, done) => readCallback(fd, buffer, offset, length, position, done))
  }
  write(buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
    return this.#call('write', (fd, done) => writeCallback(fd, buffer, offset, length, position, done))
  }
  sync(): Promise<void> {
    return this.#call<void>('fsync', (fd, done) => fsync(fd, (err) => done(err, undefined)))
  }
  datasync(): Promise<void> {
    return this.#call<void>('fdatasync', (fd, done) => fdatasync(fd, (err) => done(err, undefined)))
  }
  truncate(length: number): Promise<void> {
    return this.#call<void>('ftruncate', (fd, done) => ftruncate(fd, length, (err) => done(err, undefined)))
  }
  stat(): Promise<FileStat> {
    return this.#call<FileStat>('fstat', (fd, done) => fstat(fd, (err, s) => done(err, err ? (undefined as never) : toStat(s))))
  }
  chmod(mode: number): Promise<void> {
    return this.#call<void>('fchmod', (fd, done) => fchmod(fd, mode, (err) => done(err, undefined)))
  }
  /** Closes once; every call resolves when the descriptor is closed. */
  close(): Promise<void> {
    this.#closed ??= this.#close()
    return this.#closed
  }

  async #close(): Promise<void> {
    const fd = this.#fd
    this.#fd = -1
    if (this.#inFlight > 0) await new Promise<void>((resolve) => (this.#drained = resolve))
    await new Promise<void>((resolve, reject) => closeCallback(fd, (err) => (err ? reject(err) : resolve())))
  }
}

// O_DSYNC is undefined where the platform has none (Windows): the dsync flags are then refused.
const O_DSYNC: number | undefined = constants.O_DSYNC

/**
 * Reads open with O_NONBLOCK where the platform has it (not Windows: 0 there). It changes nothing
 * for a regular file, but an open of a FIFO returns at once instead of waiting for a writer (on a
 * thread of libuv's pool, which four such opens fill, and the process cannot exit meanwhile),
 * and a read of one returns what is there. The callers refuse what is not a regular file.
 */
const O_NONBLOCK: number = constants.O_NONBLOCK ?? 0
const READ_FLAGS: string | number = O_NONBLOCK === 0 ? 'r' : constants.O_RDONLY | O_NONBLOCK

/** The flags Node is given: strings for the plain modes, numbers with O_DSYNC or O_NONBLOCK. */
function nodeFlags(flags: OpenFlags): string | number {
  if (flags === 'r') return READ_FLAGS
  if (flags === 'r+dsync' || flags === 'wxdsync') {
    if (O_DSYNC === undefined) {
      throw Object.assign(new Error(`ENOTSUP: O_DSYNC is not available on ${process.platform}`), { code: 'ENOTSUP' })
    }
    return flags === 'r+dsync'
      ? constants.O_RDWR | O_DSYNC
      : constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | O_DSYNC
  }
  return flags
}

/**
 * The default seam: Node's asynchronous `fs` (callbacks and promises), never a `*Sync` call on
 * the caller's thread (`peekFiles` makes its synchronous calls on a worker thread of its own).
 * Stateless, so shared.
 */
export function createNodeFileSystem(): FileSystem {
  return NODE_FS
}

const NODE_FS: FileSystem = {
  async mkdir(path, mode) {
    await fsp.mkdir(path, { mode })
  },
  supportsDsync: O_DSYNC !== undefined,
  open(path, flags, mode) {
    return new Promise((resolve, reject) =>
      openCallback(path, nodeFlags(flags), mode, (err, fd) => (err ? reject(err) : resolve(new NodeFileHandle(fd)))),
    )
  },
  // link, unlink and readdir through the callback API too: a new session makes five such calls,
  // and the promise API adds its own promise and bookkeeping around each.
  link: (existingPath, newPath) =>
    new Promise<void>((resolve, reject) => linkCallback(existingPath, newPath, (err) => (err ? reject(err) : resolve()))),
  unlink: (path) => new Promise<void>((resolve, reject) => unlinkCallback(path, (err) => (err ? reject(err) : resolve()))),
  readdir: (path) =>
    new Promise<DirEntry[]>((resolve, reject) =>
      readdirCallback(path, { withFileTypes: true }, (err, entries) =>
        err
          ? reject(err)
          : resolve(entries.map((e) => ({ name: e.name, isDirectory: e.isDirectory(), isFile: e.isFile(), isSymbolicLink: e.isSymbolicLink() }))),
      ),
    ),
  stat(path) {
    // The callback form: measured ~12 µs cheaper than fs.promises.stat; every look-up of a
    // log stats its candidate paths.
    return new Promise((resolve, reject) => statCallback(path, (err, s) => (err ? reject(err) : resolve(toStat(s)))))
  },
  chmod: (path, mode) => fsp.chmod(path, mode),
  rename: (oldPath, newPath) => fsp.rename(oldPath, newPath),
  utimes: (path, atime, mtime) => fsp.utimes(path, atime, mtime),
  readlink: (path) => fsp.readlink(path),
  watchDir(dir, onChange) {
    const watcher = watch(dir, { persistent: false }, (event, name) => onChange(typeof name === 'string' ? name : undefined, event === 'change' ? 'change' : 'rename'))
    // A directory removed while watched ends its watch with an error: the safety poll takes over.
    watcher.on('error', () => watcher.close())
    return { close: () => watcher.close() }
  },
  async syncDir(path) {
    // Through a handle like any open file (the callback API): every new session waits for this
    // sync, and the promise-API calls it replaced measured ~50 µs slower here.
    const h = await NODE_FS.open(path, 'r')
    try {
      await h.sync()
    } catch (err) {
      // Windows cannot fsync a directory through Node (docs/contract.md §5.1, §12); everywhere else it is fatal.
      if (!(process.platform === 'win32' && errno(err) === 'EPERM')) throw err
    } finally {
      await h.close()
    }
  },
}

// A listing of many logs: a worker thread with synchronous calls (peek-files.ts). Not
// enumerable, so a seam made by spreading this one (`{ ...createNodeFileSystem(), open }`) does
// not carry it: such a seam's own `open` and `stat` serve its listings, one log at a time. A seam
// that wants the worker names it (`peekFiles: base.peekFiles`).
Object.defineProperty(NODE_FS, 'peekFiles', { value: peekFilesInWorker, enumerable: false, writable: true, configurable: true })
Object.defineProperty(NODE_FS, 'peekChunks', { value: true, enumerable: false, writable: true, configurable: true })
