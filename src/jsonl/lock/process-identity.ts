import { hostname } from 'node:os'
import { errno } from '../errno.js'
import type { FileSystem } from '../fs/file-system.js'

/** Host, boot and pid namespace: a pid (and its start time) only means something within all three. */
export interface MachineIdentity {
  host: string
  /** Linux `/proc/sys/kernel/random/boot_id`; empty where it cannot be read. */
  bootId: string
  /** The target of `/proc/self/ns/pid`; empty where it cannot be read. */
  pidNs: string
}

/** This process as a lock or a takeover marker records it. */
export interface ProcessIdentity extends MachineIdentity {
  pid: number
  /** Field 22 of `/proc/<pid>/stat` (clock ticks after boot); absent where it cannot be read. */
  startTime?: string
}

/** Reads at most `max` bytes of a small file through the seam. */
async function readSmallFile(fs: FileSystem, path: string, max = 4096): Promise<string> {
  const h = await fs.open(path, 'r')
  try {
    const buf = Buffer.alloc(max)
    const n = await h.read(buf, 0, buf.length, 0)
    return buf.toString('utf8', 0, n)
  } finally {
    await h.close()
  }
}

/**
 * The start time in `/proc/<pid>/stat` text: field 22. Field 2 is the command name in
 * parentheses, which may itself hold spaces and parentheses, so fields are counted after the
 * last `)`: the text after it starts with field 3.
 */
export function parseStartTime(stat: string): string | undefined {
  const close = stat.lastIndexOf(')')
  if (close === -1) return undefined
  const fields = stat.slice(close + 1).trim().split(/\s+/)
  const value = fields[22 - 3]
  return value !== undefined && /^\d+$/.test(value) ? value : undefined
}

/** What `readStartTime` gives for a process that has exited and waits to be reaped (not a start time: those are digits). */
export const EXITED = 'exited'

/**
 * Field 3 of `/proc/<pid>/stat`: `Z` (zombie) or `X` (dead) means the process has exited — once
 * field 20 (num_threads) says no thread but the leader is left. The leader of a SIGKILLed process
 * can be a zombie while its other threads finish the system call they were in (a thread-pool
 * write of the log still landing): that process has not exited yet.
 */
export function hasExited(stat: string): boolean {
  const fields = stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)
  const state = fields[0]?.[0]
  if (state !== 'Z' && state !== 'X') return false
  const threads = Number(fields[20 - 3])
  return !(threads > 1)
}

/**
 * The start time of process `pid` (`'self'` for this one). `null` when no such process exists;
 * `'exited'` when it has exited and only waits to be reaped (a zombie: it still answers a
 * signal, so it must not be taken for a pid that /proc hides); undefined when it cannot be told
 * (no `/proc`, or it cannot be read).
 */
export async function readStartTime(fs: FileSystem, pid: number | 'self'): Promise<string | null | undefined> {
  try {
    const stat = await readSmallFile(fs, `/proc/${pid}/stat`, 1024)
    return hasExited(stat) ? EXITED : parseStartTime(stat)
  } catch (err) {
    // ENOENT or ESRCH: the process is gone. Anything else tells nothing.
    return errno(err) === 'ENOENT' || errno(err) === 'ESRCH' ? null : undefined
  }
}

/** This process's identity, read once per file-system seam by the caller. */
export async function readProcessIdentity(fs: FileSystem): Promise<ProcessIdentity> {
  const [bootId, pidNs, startTime] = await Promise.all([
    readSmallFile(fs, '/proc/sys/kernel/random/boot_id', 64).then(
      (text) => text.trim(),
      () => '', // not Linux: staleness then relies on the heartbeat
    ),
    fs.readlink('/proc/self/ns/pid').catch(() => ''),
    readStartTime(fs, 'self'),
  ])
  const identity: ProcessIdentity = { pid: process.pid, host: hostname(), bootId, pidNs }
  if (typeof startTime === 'string' && startTime !== EXITED) identity.startTime = startTime
  return identity
}

/** Whether `pid` names a process of this pid namespace (EPERM: it exists but is not ours). */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return errno(err) === 'EPERM'
  }
}
