import { errno } from '../errno.js'
import type { StoreContext } from '../store-context.js'
import { SessionPersistenceError } from '../../errors.js'
import { lockHolder, type LockOwner, type ObservedRecord, observeRecord } from './lock-owner.js'
import { owe, settled } from './owed-releases.js'

/** A writer lock this instance holds. */
export interface HeldLock {
  readonly path: string
  /**
   * Undefined while the lease is fresh (no file-system call at all); otherwise a promise that
   * confirms the lock is still ours, refreshing it, and rejects with `E_LOCKED` if it was lost.
   */
  assertHeld(): Promise<void> | undefined
  release(): Promise<void>
}

export interface LeaseOptions {
  sessionId: string
  path: string
  /**
   * The inode of our lock file and the token of our record: the lock is ours exactly while the
   * path names that inode and it holds that record. The inode alone does not tell: a file system
   * reuses a freed inode number, so a lock removed by hand and taken by another instance often
   * has ours.
   */
  ino: number
  token: string
  staleLockMs: number
  /** Monotonic time (ms) at or before which the lock file's mtime was last set by us. */
  confirmedAt: number
  /** Cleanup of the taking still in flight (the temporary name's unlink); `release` waits for it. */
  settling?: Promise<void>
}

/** The longest delay a Node timer takes (2^31 − 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1

/** How often a holder refreshes its lock: every `staleLockMs / 3`, at most the longest timer delay. */
export const refreshIntervalMs = (staleLockMs: number): number => Math.min(Math.floor(staleLockMs / 3), MAX_TIMER_MS)

/** The monotonic clock of the lease (never the wall clock, which may jump). */
export const monotonicNow = (): number => performance.now()

/**
 * The lock as a lease. The holder remembers when a refresh last confirmed the lock is its own;
 * within `staleLockMs / 2` of that an append needs no file-system call for the lock, later it
 * refreshes first. A timer refreshes every `staleLockMs / 3`, so an append normally finds the
 * lease fresh. Others take the lock over only when it has not been refreshed for `staleLockMs`
 * (or when its holder is provably dead), so the half that is left is the margin for a stalled
 * event loop between a check and a write.
 */
export class Lease implements HeldLock {
  readonly path: string
  readonly #ctx: StoreContext
  readonly #o: LeaseOptions
  #confirmedAt: number
  #lost: SessionPersistenceError | undefined
  /** Release was asked for: no more refreshes. */
  #stopped = false
  /** The lock is gone (or no longer ours): nothing more to do. Set only once that is so. */
  #released = false
  #releasing: Promise<void> | undefined
  #refreshing: Promise<void> | undefined
  readonly #timer: ReturnType<typeof setInterval>
  /** Retries a release that failed, until it succeeds (owed-releases.ts). */
  #retry: ReturnType<typeof setInterval> | undefined

  constructor(ctx: StoreContext, options: LeaseOptions) {
    this.#ctx = ctx
    this.#o = options
    this.path = options.path
    this.#confirmedAt = options.confirmedAt
    // A timer's delay is a signed 32-bit number of ms: past that Node warns and fires every 1 ms.
    // Refreshing more often than every staleLockMs / 3 is harmless, so a larger one is clamped.
    this.#timer = setInterval(() => void this.#refresh().catch(() => {}), refreshIntervalMs(options.staleLockMs))
    this.#timer.unref()
  }

  assertHeld(): Promise<void> | undefined {
    if (this.#lost) return Promise.reject(this.#lost)
    if (monotonicNow() - this.#confirmedAt < this.#o.staleLockMs / 2) return undefined
    return this.#refresh()
  }

  /** Touches the lock, then checks it is still ours; one at a time. */
  #refresh(): Promise<void> {
    this.#refreshing ??= this.#touchAndCheck().finally(() => {
      this.#refreshing = undefined
    })
    return this.#refreshing
  }

  async #touchAndCheck(): Promise<void> {
    if (this.#lost) throw this.#lost
    if (this.#stopped) return
    const started = monotonicNow()
    const { fs } = this.#ctx
    // Touch first, then check: when the check finds our inode holding our record, the mtime we
    // set was ours. (Touching a lock that was taken over only refreshes the new holder's heartbeat.)
    const now = new Date()
    let seen: ObservedRecord | undefined
    try {
      await fs.utimes(this.path, now, now)
      seen = await observeRecord(fs, this.path)
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw err
    }
    // The record read names the new holder when it can be read (the loss stands either way).
    if (!this.#isOurs(seen)) throw this.#lose(seen === undefined ? 'removed' : 'taken over by another writer', seen?.owner)
    this.#confirmedAt = started
  }

  #isOurs(seen: ObservedRecord | undefined): boolean {
    return seen !== undefined && seen.ino === this.#o.ino && seen.owner?.token === this.#o.token
  }

  #lose(how: string, taker?: LockOwner): SessionPersistenceError {
    this.#lost ??= new SessionPersistenceError(
      'E_LOCKED',
      `the writer lock of session '${this.#o.sessionId}' was ${how}; nothing more is written by this instance`,
      { sessionId: this.#o.sessionId, path: this.path, ...(taker ? { holder: lockHolder(taker) } : {}) },
    )
    return this.#lost
  }

  /**
   * Removes the lock if it is still ours. One at a time; a failed release may be called again,
   * and until one succeeds it stays owed (owed-releases.ts): retried by the next acquire of this
   * lock in this process and every `staleLockMs / 3` by a timer (which, like the refresh timer,
   * does not keep the process alive). Counting the lease released before the record was gone
   * left the lock of a live process behind, which nobody may take over, for good.
   */
  release(): Promise<void> {
    if (this.#released) return Promise.resolve()
    this.#releasing ??= this.#release().finally(() => {
      this.#releasing = undefined
    })
    return this.#releasing
  }

  async #release(): Promise<void> {
    this.#stopped = true
    clearInterval(this.#timer)
    await Promise.all([this.#refreshing?.catch(() => {}), this.#o.settling])
    try {
      // Lost, or another record there now: not ours any more, leave the new holder's lock alone.
      if (!this.#lost && (await this.#oursAndFresh())) {
        await this.#ctx.fs.unlink(this.path).catch((err: unknown) => {
          if (errno(err) !== 'ENOENT') throw err
        })
      }
    } catch (err) {
      this.#owe()
      throw err
    }
    this.#released = true
    clearInterval(this.#retry)
    settled(this.path, this)
  }

  /**
   * Whether the lock is still ours, with a heartbeat another host could not yet judge stale: a
   * confirmation older than `staleLockMs / 2` (a release retried after it failed — the refresh
   * timer stopped with the first try — or one after a stalled event loop) touches the lock first.
   * Otherwise a retry that read the lock as ours could unlink it just after a host that judges it
   * by its mtime alone took it over, and that host's writer would be left without a lock.
   */
  async #oursAndFresh(): Promise<boolean> {
    const { fs } = this.#ctx
    const started = monotonicNow()
    if (started - this.#confirmedAt >= this.#o.staleLockMs / 2) {
      const now = new Date()
      try {
        await fs.utimes(this.path, now, now) // a lock taken over meanwhile only gets a fresher heartbeat
      } catch (err) {
        if (errno(err) === 'ENOENT') return false
        throw err
      }
      const seen = await observeRecord(fs, this.path)
      if (!this.#isOurs(seen)) return false
      this.#confirmedAt = started
      return true
    }
    return this.#isOurs(await observeRecord(fs, this.path))
  }

  #owe(): void {
    if (this.#retry) return
    owe(this.path, this)
    this.#retry = setInterval(() => void this.release().catch(() => {}), refreshIntervalMs(this.#o.staleLockMs))
    this.#retry.unref()
  }
}
