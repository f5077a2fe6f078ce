import { z } from 'zod'
import type { LockHolder } from '../../errors.js'
import { errno, notRegularFile } from '../errno.js'
import type { FileSystem } from '../fs/file-system.js'
import { EXITED, isPidAlive, type MachineIdentity, type ProcessIdentity, readStartTime } from './process-identity.js'

/**
 * What a lock file, and a takeover marker, record about the process that wrote it. `since` is
 * when it was written (wall clock, for people and for `verify`); staleness is judged from the
 * file's mtime, which a holder refreshes.
 */
export const LockOwnerSchema = z.object({
  pid: z.number().int().positive(),
  /** Field 22 of `/proc/<pid>/stat`; absent where the writer could not read it (not Linux). */
  startTime: z.string().regex(/^\d+$/).optional(),
  host: z.string(),
  bootId: z.string(),
  pidNs: z.string(),
  since: z.number(),
  staleLockMs: z.number().positive(),
  token: z.string().min(1).max(64).regex(/^[\w-]+$/), // part of a marker's file name
})
export type LockOwner = z.infer<typeof LockOwnerSchema>

export function ownerRecord(self: ProcessIdentity, staleLockMs: number, token: string, since: number): LockOwner {
  return { ...self, since, staleLockMs, token }
}

/** A lock file or marker as found: its parsed record (undefined when unreadable), inode and mtime. */
export interface ObservedRecord {
  owner: LockOwner | undefined
  ino: number
  mtimeMs: number
}

/**
 * Reads a lock file or marker; undefined when there is none. What is there and is not a regular
 * file is an error: the seam's open does not wait on a FIFO (file-system.ts), and it is not read.
 */
export async function observeRecord(fs: FileSystem, path: string): Promise<ObservedRecord | undefined> {
  let h
  try {
    h = await fs.open(path, 'r')
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined
    throw err
  }
  try {
    const st = await h.stat()
    // A FIFO, socket, device or directory here is nobody's lock, and never becomes stale: an
    // error (E_IO where it surfaces), neither a wait nor a takeover (docs/decisions.md).
    if (!st.isFile) throw notRegularFile(path, st)
    const buf = Buffer.alloc(Math.min(st.size, 4096))
    const n = buf.length > 0 ? await h.read(buf, 0, buf.length, 0) : 0
    return { owner: parseRecord(buf.toString('utf8', 0, n)), ino: st.ino, mtimeMs: st.mtimeMs }
  } finally {
    await h.close()
  }
}

/**
 * What is at a name `link()` has just found taken (a lock, or a takeover marker): as
 * `observeRecord`, except that a symbolic link there is an error too. The package only ever
 * links and renames regular files into these names, so a symbolic link is nobody's lock and
 * never stale, like a FIFO (docs/decisions.md). A dangling one made the open say ENOENT, read as
 * "released meanwhile", while `link()` kept saying EEXIST: a false `E_LOCKED` after every try.
 * One `readlink` more, only here (a name found taken), never in a holder's confirmation.
 */
export async function observeTaken(fs: FileSystem, path: string): Promise<ObservedRecord | undefined> {
  let target: string | undefined
  try {
    target = await fs.readlink(path)
  } catch {
    // EINVAL: not a symbolic link; ENOENT: gone. Anything else (a seam that cannot tell) tells
    // nothing: the name is read as before.
  }
  if (target !== undefined) throw new Error(`${path} is not a regular file (a symbolic link): it points to ${target}`)
  return observeRecord(fs, path)
}

function parseRecord(text: string): LockOwner | undefined {
  try {
    const parsed = LockOwnerSchema.safeParse(JSON.parse(text))
    return parsed.success ? parsed.data : undefined
  } catch {
    return undefined // empty or torn (a crash before it reached the disk): unreadable
  }
}

/**
 * Whether the writer of a record is alive: `'alive'` or `'dead'` when that can be known (same
 * host, boot and pid namespace), `'unknown'` otherwise. Same machine with a recorded start
 * time: alive exactly when a process with that pid and that start time exists (a reused pid
 * has another start time).
 */
export async function writerState(
  fs: FileSystem,
  owner: LockOwner,
  machine: MachineIdentity,
): Promise<'alive' | 'dead' | 'unknown'> {
  const sameMachine =
    machine.bootId !== '' &&
    owner.host === machine.host &&
    owner.bootId === machine.bootId &&
    owner.pidNs === machine.pidNs
  if (!sameMachine) return 'unknown'
  const current = await readStartTime(fs, owner.pid)
  // Exited, waiting to be reaped (a zombie answers kill(pid, 0), so this comes first): dead,
  // with or without a recorded start time.
  if (current === EXITED) return 'dead'
  if (owner.startTime !== undefined) {
    // No /proc entry, yet the pid answers: /proc hides it (mounted with hidepid): cannot tell.
    if (current === null) return isPidAlive(owner.pid) ? 'unknown' : 'dead'
    if (current !== undefined) return current === owner.startTime ? 'alive' : 'dead'
  }
  // No start time to compare: a missing pid still proves death; a present one proves nothing.
  return isPidAlive(owner.pid) ? 'unknown' : 'dead'
}

/**
 * Whether `seen` is the record `known` was: the same inode holding the same token. The inode
 * alone does not tell: a file system reuses a freed inode number, so a record removed and
 * replaced by another instance's often has the old one's.
 */
export function sameRecord(
  seen: Pick<ObservedRecord, 'ino' | 'owner'> | undefined,
  known: Pick<ObservedRecord, 'ino' | 'owner'>,
): boolean {
  return seen !== undefined && seen.ino === known.ino && seen.owner?.token === known.owner?.token
}

/** The name a record goes by in a takeover marker's name: its token, or its inode and mtime when unreadable. */
export function recordKey(record: ObservedRecord): string {
  return record.owner?.token ?? `ino${record.ino}-${Math.trunc(record.mtimeMs)}`
}

/** What an `E_LOCKED` error tells of a holder. */
export function lockHolder(owner: LockOwner): LockHolder {
  return { pid: owner.pid, host: owner.host, since: owner.since }
}

export function describeOwner(owner: LockOwner): string {
  return `pid ${owner.pid} on host ${owner.host} since ${new Date(owner.since).toISOString()}`
}
