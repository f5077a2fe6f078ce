import type { SessionPersistenceError } from '../errors.js'
import { type LockEntry, readLockEntries } from '../jsonl/lock/lock-report.js'
import { lockedError } from '../jsonl/lock/session-lock.js'
import type { OpenedRoot } from './open-root.js'
import { formatTime, shown } from './render.js'

// What `verify` shows of a root's lock directory: a dead writer's lock, a takeover marker or a
// temporary lock file a crash left can delay loads for up to staleLockMs, and an operator who
// wonders why a session does not load looks at `verify`.

/** The lock directory's entries, judged as a takeover would judge them. */
export async function lockVerdicts(root: string): Promise<LockVerdict[]> {
  return (await readLockEntries(root)).map(lockVerdict)
}

/**
 * The sessions a lock holds that a delete could not take over now (not stale: its writer alive,
 * or unknown and refreshed within its staleLockMs), each with the `E_LOCKED` that delete would
 * refuse with. Read-only: no lock is taken, so a dry run can say what the real run will skip.
 */
export async function heldSessions(root: string): Promise<Map<string, SessionPersistenceError>> {
  const held = new Map<string, SessionPersistenceError>()
  for (const e of await readLockEntries(root)) {
    if (e.kind === 'lock' && !e.stale && e.sessionId !== undefined) held.set(e.sessionId, lockedError(e.sessionId, e.path, e.owner))
  }
  return held
}

type HeldSessions = (ids: readonly string[]) => Promise<Map<string, SessionPersistenceError>>

/**
 * The sessions among `ids` a live writer holds on either kind of root, with the E_LOCKED a load
 * or delete would meet; no lock taken. A directory root: its lock directory (heldSessions). A
 * PostgreSQL root: the server's advisory locks (pg_locks, src/postgres/held-sessions.ts), found
 * by the symbol that backend registers, so that this module imports neither it nor `pg`. Any
 * other store: none known.
 */
export async function heldBy(root: OpenedRoot, ids: readonly string[]): Promise<Map<string, SessionPersistenceError>> {
  if (root.directory !== undefined) return heldSessions(root.directory)
  const held = (root.store as unknown as Record<symbol, HeldSessions | undefined>)[Symbol.for('session-persistence-jsonl/postgres:heldSessions')]
  return held ? held.call(root.store, ids) : new Map()
}

export interface LockVerdict {
  kind: LockEntry['kind']
  path: string
  sessionId?: string
  writer: LockEntry['writer']
  stale: boolean
  ageMs: number
  holder?: { pid: number; host: string; since: number }
}

function lockVerdict(e: LockEntry): LockVerdict {
  return {
    kind: e.kind,
    path: e.path,
    ...(e.sessionId !== undefined ? { sessionId: e.sessionId } : {}),
    writer: e.writer,
    stale: e.stale,
    ageMs: Math.round(e.ageMs),
    ...(e.owner ? { holder: { pid: e.owner.pid, host: e.owner.host, since: e.owner.since } } : {}),
  }
}

export function describeLockVerdict(l: LockVerdict): string {
  const who = l.holder ? `pid ${l.holder.pid} on ${l.holder.host} since ${formatTime(l.holder.since)}` : 'an unreadable record'
  const state = l.stale ? 'stale: the next load steps over it' : l.writer === 'alive' ? 'alive' : `refreshed ${Math.round(l.ageMs / 1000)} s ago`
  if (l.kind === 'lock') return `lock         ${shown(l.sessionId ?? l.path, true)}: held by ${who} (${state})`
  if (l.kind === 'marker') return `marker       ${shown(l.path, true)}: takeover by ${who} (${state})`
  return `lock temp    ${shown(l.path, true)} (left by an interrupted lock write; safe to delete when no writer runs)`
}
