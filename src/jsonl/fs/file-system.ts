/**
 * The narrow file-system seam of the storage core. Every file-system call of the
 * package goes through it; only node-file-system.ts (and the worker of peek-files.ts it starts) use `node:fs`. Errors are Node-style
 * system errors with a string `code` (`ENOENT`, `EEXIST`, `ENOSPC`…).
 */
export interface FileSystem {
  /** Creates one directory (not recursive); rejects `EEXIST` if it exists, `ENOENT` if its parent does not. */
  mkdir(path: string, mode: number): Promise<void>
  /** Opens a file (see `OpenFlags`); a created file gets `mode`. */
  open(path: string, flags: OpenFlags, mode?: number): Promise<FileHandle>
  /**
   * Whether `'r+dsync'` and `'wxdsync'` are supported: `'r+'` and `'wx'` with O_DSYNC, so that
   * every write is durable (as if followed by fdatasync) when it resolves. Absent means no.
   */
  readonly supportsDsync?: boolean
  /** Hard link; never overwrites (`EEXIST`). */
  link(existingPath: string, newPath: string): Promise<void>
  unlink(path: string): Promise<void>
  readdir(path: string): Promise<DirEntry[]>
  stat(path: string): Promise<FileStat>
  chmod(path: string, mode: number): Promise<void>
  /** Atomically replaces `newPath` (used only to take over a stale writer lock). */
  rename(oldPath: string, newPath: string): Promise<void>
  /** Sets access and modification times (a writer lock's heartbeat). */
  utimes(path: string, atime: Date, mtime: Date): Promise<void>
  readlink(path: string): Promise<string>
  /** Makes the directory's entries durable (open the directory, fsync it). */
  syncDir(path: string): Promise<void>
  /**
   * Calls `onChange` (soon, not necessarily once per change) when an entry of the directory
   * `dir` is created, removed, renamed or written (inotify through `fs.watch` on Linux). Only
   * `watch` (§15.3) uses it, as a hint: a seam without it, or a watch that fails, leaves the
   * watcher to its slow safety poll. Never keeps the process alive. `kind` (optional) is
   * `'change'` when only the entry's content changed (a write), `'rename'` when the entry was
   * created, removed or renamed; absent, a watcher takes any change as possibly a rename.
   */
  watchDir?(dir: string, onChange: (name: string | undefined, kind?: 'change' | 'rename') => void): { close(): void }
  /**
   * A look at many files at once, for a listing (§4.6, §15.4): in order, batch by batch, each
   * file's size and mtime (as `stat` gives them, symbolic links followed) and, when `headBytes`
   * is above 0, its first line as far as it lies within `headBytes` (open, read at 0, `fstat`,
   * close). A file that fails carries the error those calls would have rejected with. A seam
   * without it is used file by file through the calls above; the Node seam runs it on a worker
   * thread. The yielded buffers are valid until the next batch is asked for. A seam that wraps
   * another and changes how files are opened or stat'ed must not pass this member on (the Node
   * seam's is not enumerable, so spreading it leaves it out): a listing would bypass the wrapper.
   * With `peekChunks`, `paths` may also come in chunks while the files are looked at (a listing
   * still reading its buckets' directories): the batches then follow the concatenated chunks,
   * `start` counting from the first path of the first chunk.
   */
  peekFiles?(paths: readonly string[] | AsyncIterable<readonly string[]>, headBytes: number, options?: PeekOptions): AsyncIterable<PeekedBatch>
  /**
   * Whether `peekFiles` takes its paths in chunks (an async iterable) as well as in a list.
   * Absent: a list only, as a seam written before chunks existed expects (it would read a chunked
   * `paths` as no files at all). The Node seam's is true and, like its `peekFiles`, not enumerable.
   */
  readonly peekChunks?: boolean
}

/**
 * `join`: a function run on the seam's own threads (from its source text, so it must use nothing
 * but its arguments; session/sealed-head.ts is the one the listing gives) that copies a whole
 * first line's bytes, as it chooses, to `out` at `at` and returns the offset after them, or -1 to
 * leave the line as a head. What it takes is handed over joined (see `PeekedBatch.joined`), not
 * as the file's `head`.
 */
export interface PeekOptions {
  /** With `paths` in chunks: about how many there will be (how many threads are worth starting). */
  expectedFiles?: number
  join?: (line: Uint8Array, len: number, out: Uint8Array, at: number, crc32: (data: Uint8Array) => number, isUtf8: (data: Uint8Array) => boolean) => number
}

/** What `peekFiles` yields: the files `paths[start …]`, in order. */
export interface PeekedBatch {
  start: number
  files: PeekedFile[]
  /**
   * With `options.join`: what it copied of the batch's first lines, in order, separated by `,`
   * and enclosed in `[` `]`; `taken[i]` is 1 for the files whose line is in it (their `head`
   * is then absent, `headEnd` is `'line'`). Absent when the seam could not run `join`.
   */
  joined?: { bytes: Buffer; taken: Uint8Array; count: number }
}

export interface PeekedFile {
  size: number
  mtimeMs: number
  /** The file's first bytes up to its first `\n` (excluded), at most `headBytes` of them. */
  head?: Buffer
  /** `'line'`: `head` is a whole first line; `'eof'`: the file ended with no `\n`; `'more'`: no `\n` within `headBytes`. */
  headEnd?: 'line' | 'eof' | 'more'
  /** Set when the file could not be looked at (the other fields then mean nothing). */
  error?: NodeJS.ErrnoException
}

/**
 * `'r'` reads, and must not wait: an open of a FIFO returns at once (the Node seam adds
 * O_NONBLOCK), and the package refuses what its `fstat` shows is not a regular file. `'r+'`
 * reads and writes an existing file; `'wx'` creates a new file exclusively
 * (`EEXIST` if the name exists). The `dsync` variants add O_DSYNC (see `supportsDsync`).
 */
export type OpenFlags = 'r' | 'r+' | 'wx' | 'r+dsync' | 'wxdsync'

export interface DirEntry {
  name: string
  isDirectory: boolean
  isFile: boolean
  /**
   * Whether the entry is a symbolic link (not followed). Absent: not known, and an entry that is
   * neither file nor directory is opened to see what it is; false lets a listing skip a FIFO,
   * socket or device without opening it.
   */
  isSymbolicLink?: boolean
}

export interface FileStat {
  size: number
  ino: number
  mtimeMs: number
  isDirectory: boolean
  isFile: boolean
  /**
   * Type and permission bits, as in Node's `Stats.mode` (`mode & 0o777` is the permissions).
   * Optional so that a seam written before it still fits: when absent, the package cannot tell
   * whether a file it created came out `0600` and chmods it, as it always did.
   */
  mode?: number
}

/**
 * An open file. Calls on one handle may be in flight at once (a tail load reads the header while
 * it `stat`s the log): `close` waits for them, or makes them fail, before the descriptor is let go.
 */
export interface FileHandle {
  /** Reads up to `length` bytes at `position`; resolves with the number read (0 at end of file). */
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number>
  /** Writes at `position`; may write fewer bytes than asked (callers loop). */
  write(buffer: Buffer, offset: number, length: number, position: number): Promise<number>
  /** fsync(2) */
  sync(): Promise<void>
  /** fdatasync(2) */
  datasync(): Promise<void>
  truncate(length: number): Promise<void>
  stat(): Promise<FileStat>
  chmod(mode: number): Promise<void>
  close(): Promise<void>
}
