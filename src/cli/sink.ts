import { constants, type Stats } from 'node:fs'
import { type FileHandle, lstat, open, readlink, realpath, stat } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import { explained } from './cli-errors.js'
import type { Io } from './commands.js'
import { type FileIdentity, keptByStore } from './store-links.js'

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
 *
 * Given what `refuseStoreTarget` judged, the file is held to it: it is opened without truncating,
 * the opened descriptor is checked (`checkOpened`), and only then truncated — what was checked is
 * what is written, even if the name was pointed elsewhere between the check and the open.
 */
export async function fileSink(path: string, judged?: CheckedOut): Promise<Sink> {
  const handle = await openOut(path)
  try {
    const st = await handle.stat()
    if (judged) await checkOpened(path, st, judged)
    if (st.isFile()) await handle.truncate(0)
    if (st.isFile() && (st.mode & 0o7777) !== OUT_MODE) {
      await handle.chmod(OUT_MODE).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EPERM') throw err
      })
    }
  } catch (err) {
    await handle.close().catch(() => {})
    throw err instanceof SessionPersistenceError ? err : writeFailed(path, err)
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

// Write-only, created if missing, and NOT truncated (no O_TRUNC): fileSink truncates once the
// opened file has been checked.
const OPEN_FLAGS = constants.O_WRONLY | constants.O_CREAT

/** Opens `--out` for writing; what an operator can fix (a directory, a missing one) is said so. */
async function openOut(path: string): Promise<FileHandle> {
  const dir = dirname(resolve(path))
  try {
    await stat(dir)
    return await open(path, OPEN_FLAGS, OUT_MODE)
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

/** What `refuseStoreTarget` judged, for `fileSink` to hold the opened file to. */
export interface CheckedOut {
  root: string | undefined
  logPath: string | undefined
  /**
   * The file the name reached when it was checked (symbolic links followed), with its number of
   * names then; `undefined` if there was none, `'no-directory'` if its directory was missing.
   */
  seen: (FileIdentity & { nlink: number }) | undefined | 'no-directory'
}

/**
 * Refuses (E_CONFIG) an output file that would overwrite what the store keeps: the session's own
 * log (by path, through symlinks, or as a hard link of it), or anything inside the JSONL root's
 * subdirectories (its buckets of logs and temporary files, `.locks`), whatever name reaches it
 * (a hard link outside the root to another session's log, to a lock record). The path is judged
 * as the file would be opened: the real path of its directory, plus its name (and the real path
 * of the name when it exists). Any other existing file is overwritten, as `>` would. Returns what
 * was judged, for `fileSink` to check the opened file against.
 */
export async function refuseStoreTarget(out: string, rootDirectory: string | undefined, logPath: string | undefined): Promise<CheckedOut> {
  const root = rootDirectory === undefined ? undefined : await realpath(rootDirectory).catch(() => resolve(rootDirectory))
  const given = resolve(out)
  const dir = await realpath(dirname(given)).catch(() => undefined)
  if (dir === undefined) return { root, logPath, seen: 'no-directory' } // fileSink says the directory is missing
  const named = join(dir, basename(given))
  const candidates = [named, await realpath(named).catch(() => named), await danglingTarget(named)]
  if (logPath !== undefined) {
    const log = await realpath(logPath).catch(() => resolve(logPath))
    if (candidates.includes(log)) refuse(out, "it is the session's own log")
  }
  if (root !== undefined) {
    for (const c of candidates) {
      const rel = relative(root, c)
      if (rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) && rel.split(sep).length >= 2) {
        refuse(out, `it is inside ${join(root, rel.split(sep)[0]!)}, a directory of the session root ${root}`)
      }
    }
  }
  // The file itself, by its identity: another name of a file the store keeps is refused too.
  const st = await stat(candidates[1]!).catch(() => stat(named)).catch(() => undefined)
  const judged: CheckedOut = { root, logPath, seen: st && { dev: st.dev, ino: st.ino, nlink: st.nlink } }
  if (st) await refuseKept(out, st, judged)
  return judged
}

function refuse(out: string, why: string): never {
  throw explained(new SessionPersistenceError('E_CONFIG', `refusing to write ${out}: ${why}; write the export outside the session root`))
}

/**
 * Refuses a file that is the session's own log, or (having more than one name) a file inside
 * the root under another name. A file of one name is never looked for in the root: it is
 * outside, since the path checks found its name outside.
 */
async function refuseKept(out: string, st: Stats, judged: CheckedOut): Promise<void> {
  if (judged.logPath !== undefined) {
    const log = await stat(judged.logPath).catch(() => undefined)
    if (log && log.dev === st.dev && log.ino === st.ino) refuse(out, "it is the session's own log (a link to it)")
  }
  if (judged.root === undefined || !st.isFile() || st.nlink < 2) return
  const kept = await keptByStore(judged.root, st)
  if (kept !== undefined) refuse(out, `it is a hard link to ${kept}, a file the session root keeps`)
}

/**
 * Holds the opened `--out` to what `refuseStoreTarget` judged. A file that is not the one the
 * name reached then (or, where there was none, one that already holds data; or one whose
 * directory was missing) was put there meanwhile: it is judged as the store's (E_CONFIG when it
 * is one) and otherwise refused as changed (E_IO), nothing written either way. The same file
 * with as many names as it had was judged already; one that gained a name is judged again.
 */
async function checkOpened(out: string, st: Stats, judged: CheckedOut): Promise<void> {
  const { seen } = judged
  const same = seen !== undefined && seen !== 'no-directory' && st.dev === seen.dev && st.ino === seen.ino
  if (same && st.nlink <= seen.nlink) return
  await refuseKept(out, st, judged)
  const changed = seen === 'no-directory' || (seen === undefined ? st.isFile() && st.size > 0 : !same)
  if (changed) {
    throw explained(
      new SessionPersistenceError('E_IO', `cannot write ${out}: it was replaced while it was being checked; nothing was written, run the export again`, { path: out }),
    )
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
