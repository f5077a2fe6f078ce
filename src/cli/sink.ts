import { type FileHandle, lstat, open, readlink, realpath, stat } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import { explained } from './cli-errors.js'
import type { Io } from './commands.js'

/** Where a streamed view writes: text is held until `flush` (or about 64 KiB), then written with back-pressure. */
export interface Sink {
  write(text: string): void
  /** Writes what is held and waits until the destination has taken it. */
  flush(): Promise<void>
  /** Flushes and releases the destination. */
  close(): Promise<void>
}

const HOLD_BYTES = 64 * 1024

function holding(writeOut: (text: string) => Promise<void>, done: () => Promise<void>): Sink {
  let held: string[] = []
  let size = 0
  let pending = Promise.resolve()
  const flush = () => {
    if (held.length > 0) {
      const text = held.join('')
      held = []
      size = 0
      pending = pending.then(() => writeOut(text))
      pending.catch(() => {}) // reported by the next flush or close, which awaits it
    }
    return pending
  }
  return {
    write(text) {
      held.push(text)
      size += text.length
      if (size >= HOLD_BYTES) void flush()
    },
    flush,
    close: async () => {
      try {
        await flush()
      } finally {
        await done()
      }
    },
  }
}

/** Standard output, through the CLI's `Io`. */
export function ioSink(io: Io): Sink {
  return holding(
    async (text) => {
      io.out(text)
      await io.drain?.()
    },
    async () => {},
  )
}

/** The mode of a file the CLI writes session data to (SPEC §5: 0600 whatever the umask). */
const OUT_MODE = 0o600

/**
 * A file, created or truncated (its directory must exist). It holds a session's transcript, so
 * it is 0600 whatever the umask: created so, and a regular file that had looser bits (or that the
 * umask cut) is chmod'ed. What is not a regular file (a terminal, /dev/null, a FIFO a reader
 * waits on) keeps its mode, and so does a file of another user's that this one may not chmod.
 * A file that cannot be opened or written is E_IO (§9) naming it, the errno its cause.
 */
export async function fileSink(path: string): Promise<Sink> {
  const handle = await openOut(path)
  try {
    const st = await handle.stat()
    if (st.isFile() && (st.mode & 0o7777) !== OUT_MODE) {
      await handle.chmod(OUT_MODE).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EPERM') throw err
      })
    }
  } catch (err) {
    await handle.close().catch(() => {})
    throw writeFailed(path, err)
  }
  return holding(
    async (text) => {
      await handle.write(text).catch((err: unknown) => {
        throw writeFailed(path, err)
      })
    },
    () =>
      handle.close().catch((err: unknown) => {
        throw writeFailed(path, err)
      }),
  )
}

/** Opens `--out` for writing; what an operator can fix (a directory, a missing one) is said so. */
async function openOut(path: string): Promise<FileHandle> {
  const dir = dirname(resolve(path))
  try {
    await stat(dir)
    return await open(path, 'w', OUT_MODE)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    const fail = (why: string) => explained(new SessionPersistenceError('E_IO', `cannot write ${path}: ${why}`, { path, cause: err }))
    if (code === 'EISDIR') throw fail('it is a directory; give --out the path of a file')
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      // Which part is missing or not a directory: the nearest ancestor that is not a directory.
      const culprit = await firstNonDirectory(dir)
      if (culprit?.missing) throw fail(`no such directory ${culprit.path}; create it first, or give --out a path in an existing directory`)
      if (culprit) throw fail(`${culprit.path} is not a directory; give --out a path in an existing directory`)
    }
    throw fail(errnoMessage(err))
  }
}

/** The outermost ancestor of `dir` (itself included) that is missing or not a directory, if any. */
async function firstNonDirectory(dir: string): Promise<{ path: string; missing: boolean } | undefined> {
  const chain: string[] = []
  for (let at = dir; ; at = dirname(at)) {
    chain.unshift(at)
    if (dirname(at) === at) break
  }
  for (const at of chain) {
    const st = await stat(at).catch((err: NodeJS.ErrnoException) => err)
    if (st instanceof Error) return st.code === 'ENOTDIR' ? undefined : { path: at, missing: st.code === 'ENOENT' }
    if (!st.isDirectory()) return { path: at, missing: false }
  }
  return undefined
}

/** A write to `--out` that failed after it was opened (a full disk, /dev/full): E_IO naming the file. */
function writeFailed(path: string, err: unknown): SessionPersistenceError {
  return new SessionPersistenceError('E_IO', `writing ${path} failed: ${errnoMessage(err)}`, { path, cause: err })
}

/** An errno error as `CODE: message`, its code said once (Node's messages start with it). */
function errnoMessage(err: unknown): string {
  const e = err as NodeJS.ErrnoException
  const message = String(e?.message ?? e)
  return e?.code && !message.startsWith(`${e.code}: `) ? `${e.code}: ${message}` : message
}

/**
 * Refuses (E_CONFIG) an output file that would overwrite what the store keeps: the session's own
 * log (by path, through symlinks, or as a hard link of it), or anything inside the JSONL root's
 * subdirectories (its buckets of logs and temporary files, `.locks`). The path is judged as the
 * file would be opened: the real path of its directory, plus its name (and the real path of the
 * name when it exists). Any other existing file is overwritten, as `>` would.
 */
export async function refuseStoreTarget(out: string, rootDirectory: string | undefined, logPath: string | undefined): Promise<void> {
  const given = resolve(out)
  const dir = await realpath(dirname(given)).catch(() => undefined)
  if (dir === undefined) return // fileSink says the directory is missing
  const named = join(dir, basename(given))
  const candidates = [named, await realpath(named).catch(() => named), await danglingTarget(named)]
  const refuse = (why: string) => {
    throw explained(new SessionPersistenceError('E_CONFIG', `refusing to write ${out}: ${why}; write the export outside the session root`))
  }
  if (logPath !== undefined) {
    const log = await realpath(logPath).catch(() => resolve(logPath))
    if (candidates.includes(log)) refuse("it is the session's own log")
    const [a, b] = await Promise.all([stat(named).catch(() => undefined), stat(log).catch(() => undefined)])
    if (a && b && a.dev === b.dev && a.ino === b.ino) refuse("it is the session's own log (a link to it)")
  }
  if (rootDirectory === undefined) return
  const root = await realpath(rootDirectory).catch(() => resolve(rootDirectory))
  for (const c of candidates) {
    const rel = relative(root, c)
    if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep).length >= 2) {
      refuse(`it is inside ${join(root, rel.split(sep)[0]!)}, a directory of the session root ${root}`)
    }
  }
}

/**
 * Where opening `path` would create the file when it is a symbolic link whose target does not
 * exist yet (`realpath` fails there): the links followed by hand, each relative to its own
 * directory, then the real path of the last one's directory plus its name. `path` itself
 * otherwise (it is judged as it is).
 */
async function danglingTarget(path: string): Promise<string> {
  let at = path
  for (let hops = 0; hops < 40; hops++) {
    const st = await lstat(at).catch(() => undefined)
    if (!st?.isSymbolicLink()) break
    at = resolve(dirname(at), await readlink(at))
  }
  const dir = await realpath(dirname(at)).catch(() => dirname(at))
  return join(dir, basename(at))
}
