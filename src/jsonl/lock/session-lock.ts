import { dirname, join } from 'node:path'
import { encodeSessionId } from '../../session/id-encoding.js'
import { LOCKS_DIR, uniqueToken } from '../paths.js'
import type { StoreContext } from '../store-context.js'
import { SessionPersistenceError } from '../../errors.js'
import type { FileSystem } from '../fs/file-system.js'
import { type HeldLock, Lease, monotonicNow } from './lease.js'
import {
  describeOwner,
  lockHolder,
  type LockOwner,
  type ObservedRecord,
  observeRecord,
  observeTaken,
  ownerRecord,
  sameRecord,
  writerState,
} from './lock-owner.js'
import { retryOwed, retryOwedWhere } from './owed-releases.js'
import { type ProcessIdentity, readProcessIdentity } from './process-identity.js'
import { linkRecord, type RecordFile, writeRecordFile } from './record-file.js'
import { claimTakeover } from './takeover.js'

export type { HeldLock } from './lease.js'

/** Attempts per acquire: each ends with the lock, a refusal, or a lock that changed under us. */
const MAX_ATTEMPTS = 8
const identities = new WeakMap<FileSystem, Promise<ProcessIdentity>>()

/** Our lock written under a temporary name, about to be published. */
interface Candidate {
  file: RecordFile
  owner: LockOwner
  /** Monotonic time before the record was written: the lease's first confirmation. */
  writtenAt: number
}

/**
 * One writer per session across processes (docs/locking.md). A lock is
 * `<root>/.locks/<encoded-id>.lock`, published with `link()` (never overwrites), refreshed by
 * touching its mtime, and taken over when its holder is dead, or, when that cannot be known,
 * when it has not been refreshed for the holder's own `staleLockMs`. A takeover is claimed
 * with a marker first (takeover.ts), so of several instances exactly one replaces the lock.
 */
export class SessionLocks {
  readonly #ctx: StoreContext
  readonly #staleLockMs: number
  /**
   * Locks whose mtime lies in the future (a holder whose clock runs ahead): the record as first
   * seen, and when, on this instance's own monotonic clock. Bounded by the sessions asked for.
   */
  readonly #aheadSeen = new Map<string, { key: string; since: number }>()

  constructor(ctx: StoreContext, staleLockMs: number) {
    this.#ctx = ctx
    this.#staleLockMs = staleLockMs
  }

  #self(): Promise<ProcessIdentity> {
    // The identity belongs to the process: read it once per file-system seam, not per instance.
    let identity = identities.get(this.#ctx.fs)
    if (!identity) {
      identity = readProcessIdentity(this.#ctx.fs)
      identities.set(this.#ctx.fs, identity)
    }
    return identity
  }

  async acquire(sessionId: string): Promise<HeldLock> {
    const path = this.#path(sessionId)
    // A release of this lock that failed in this process (owed-releases.ts) is done first: its
    // record names this live process, which nobody takes over. If it fails again, so does this.
    await retryOwed(path)
    const self = await this.#self()
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const held = await this.#attempt(sessionId, path, self)
      if (held) return held
    }
    // The lock kept changing hands under us: name whoever holds it now, if anyone can be read.
    const current = await observeRecord(this.#ctx.fs, path).catch(() => undefined)
    throw lockedError(sessionId, path, current?.owner, 'the lock kept changing hands')
  }

  /**
   * Retries the release of `sessionId`'s lock if this process owes one (a close or a failed load
   * whose release failed): a retried `close`. No file-system call when nothing is owed.
   */
  retryRelease(sessionId: string): Promise<void> {
    let path: string
    try {
      path = this.#path(sessionId)
    } catch {
      return Promise.resolve() // no such lock: nothing owed
    }
    return retryOwed(path)
  }

  /** Retries every release this process owes in this root (`closeAll`); rejects with the first failure. */
  retryReleases(): Promise<void> {
    const dir = join(this.#ctx.root, LOCKS_DIR)
    return retryOwedWhere((path) => dirname(path) === dir)
  }

  #path(sessionId: string): string {
    return join(this.#ctx.root, LOCKS_DIR, `${encodeSessionId(sessionId)}.lock`)
  }

  /** One try: the lock, `E_LOCKED`, or undefined when the lock changed under us (try again). */
  async #attempt(sessionId: string, path: string, self: ProcessIdentity): Promise<HeldLock | undefined> {
    const candidate = await this.#write(self)
    let discarding: Promise<void> | undefined
    try {
      // Closing the temporary file and publishing it are independent: overlap them. Once
      // published, the lock is ours whatever the close did (its bytes were written before):
      // throwing then would leave a lock of a live process that nobody ever releases.
      const [closed, linked] = await Promise.allSettled([candidate.file.close(), linkRecord(this.#ctx, candidate.file, path)])
      if (linked.status === 'rejected') throw linked.reason
      if (linked.value) {
        // The temporary name goes while the caller carries on (its re-check under the lock need
        // not wait for it); releasing the lock waits for it.
        discarding = candidate.file.discard()
        return this.#lease(sessionId, path, candidate, discarding)
      }
      if (closed.status === 'rejected') throw closed.reason
      const current = await observeTaken(this.#ctx.fs, path)
      if (!current) return undefined // released meanwhile
      if (!(await this.#lockIsStale(current, self, path))) throw lockedError(sessionId, path, current.owner)
      return await this.#takeOver(sessionId, path, candidate, current)
    } finally {
      if (!discarding) await candidate.file.discard()
    }
  }

  async #write(self: ProcessIdentity): Promise<Candidate> {
    const writtenAt = monotonicNow()
    const owner = ownerRecord(self, this.#staleLockMs, uniqueToken(), Date.now())
    const file = await writeRecordFile(this.#ctx, join(this.#ctx.root, LOCKS_DIR), owner)
    return { file, owner, writtenAt }
  }

  /** Replaces a stale lock with ours, once a takeover claim is ours. */
  async #takeOver(sessionId: string, path: string, candidate: Candidate, stale: ObservedRecord): Promise<HeldLock | undefined> {
    const self = await this.#self()
    const outcome = await claimTakeover(this.#ctx, {
      dir: join(this.#ctx.root, LOCKS_DIR),
      stale,
      maker: ownerRecord(self, this.#staleLockMs, uniqueToken(), Date.now()),
      isStale: (marker) => this.#markerIsStale(marker, self),
    })
    if (outcome.kind === 'changed') return undefined // look again
    // Name the instance taking over, not the stale lock's (dead or silent) holder.
    if (outcome.kind === 'blocked') throw lockedError(sessionId, path, outcome.taker, 'another instance is taking over its stale lock')
    const { claim } = outcome
    try {
      // The same file (inode and record: a freed inode number is reused), not refreshed since it
      // was judged stale: a holder that woke up and refreshed it meanwhile holds a fresh lease
      // and must not be replaced (look again).
      const still = await observeRecord(this.#ctx.fs, path)
      if (!still || !sameRecord(still, stale) || still.mtimeMs !== stale.mtimeMs || !(await claim.stillOurs())) return undefined
      await this.#ctx.fs.rename(candidate.file.tmp, path)
      return this.#lease(sessionId, path, candidate)
    } finally {
      await claim.release()
    }
  }

  #lease(sessionId: string, path: string, candidate: Candidate, settling?: Promise<void>): HeldLock {
    return new Lease(this.#ctx, {
      sessionId,
      path,
      ino: candidate.file.ino,
      token: candidate.owner.token,
      staleLockMs: this.#staleLockMs,
      confirmedAt: candidate.writtenAt,
      ...(settling ? { settling } : {}),
    })
  }

  /** A lock is stale when unreadable, when its holder is dead, or (unknown holder) not refreshed for its staleLockMs. */
  async #lockIsStale(lock: ObservedRecord, self: ProcessIdentity, path: string): Promise<boolean> {
    if (!lock.owner) return true
    const state = await writerState(this.#ctx.fs, lock.owner, self)
    if (state !== 'unknown') return state === 'dead'
    const age = Date.now() - lock.mtimeMs
    if (age >= -lock.owner.staleLockMs) {
      this.#aheadSeen.delete(path)
      return age > lock.owner.staleLockMs
    }
    // Refreshed "in the future" by more than its staleLockMs: the holder's clock runs ahead (or
    // ran ahead when it crashed), and the mtime says nothing this clock can compare. Judged by
    // this instance's own observation instead: a live holder touches its lock every
    // staleLockMs / 3, changing the mtime; one left unchanged for its staleLockMs is stale.
    // (By the mtime alone the session stayed locked until this clock caught up: an hour ahead,
    // an hour.)
    const key = `${lock.ino} ${lock.owner.token} ${lock.mtimeMs}`
    const seen = this.#aheadSeen.get(path)
    if (!seen || seen.key !== key) {
      this.#aheadSeen.set(path, { key, since: monotonicNow() })
      return false
    }
    return monotonicNow() - seen.since > lock.owner.staleLockMs
  }

  /** A marker is stale when unreadable (only a crash leaves one), its maker dead, or older than its staleLockMs. */
  async #markerIsStale(marker: ObservedRecord, self: ProcessIdentity): Promise<boolean> {
    if (!marker.owner) return true
    if (Date.now() - marker.mtimeMs > marker.owner.staleLockMs) return true
    return (await writerState(this.#ctx.fs, marker.owner, self)) === 'dead'
  }
}

/** `E_LOCKED` naming the holder (pid, host, since) as a field when its record could be read. */
export function lockedError(
  sessionId: string,
  path: string,
  owner: LockOwner | undefined,
  extra?: string,
): SessionPersistenceError {
  const holder = owner ? describeOwner(owner) : 'an unknown holder'
  return new SessionPersistenceError(
    'E_LOCKED',
    `session '${sessionId}' is being written by ${holder}${extra ? ` (${extra})` : ''}`,
    { sessionId, path, ...(owner ? { holder: lockHolder(owner) } : {}) },
  )
}
