import { join } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import { inEnsuredDir, writeAll } from '../core/durable.js'
import { encodeSessionId } from '../core/id-encoding.js'
import { LOCKS_DIR, tmpName, uniqueToken } from '../core/paths.js'
import { FILE_MODE, type StoreContext } from '../core/store-context.js'
import {
  describeOwner,
  isPidAlive,
  type LockOwner,
  LockOwnerSchema,
  type MachineIdentity,
  readMachineIdentity,
} from './lock-owner.js'

/** A writer lock this instance holds. */
export interface HeldLock {
  readonly path: string
  /** Rejects with `E_LOCKED` when the lock was taken over or removed since it was taken. */
  assertHeld(): Promise<void>
  release(): Promise<void>
}

interface ObservedLock {
  owner: LockOwner | undefined // undefined: empty or unreadable, hence stale
  ino: number
  mtimeMs: number
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException).code
const identities = new WeakMap<object, Promise<MachineIdentity>>()

/**
 * One writer per session across processes (SPEC 5.3). A lock is `<root>/.locks/<encoded-id>.lock`,
 * published with `link()` (never overwrites), refreshed by touching its mtime, and taken over
 * when its holder is provably dead or its heartbeat is older than the holder's `staleLockMs`.
 * A takeover first creates `.takeover-<token of the stale lock>` exclusively: of several
 * instances racing for one stale lock exactly one creates it and replaces the lock.
 */
export class SessionLocks {
  readonly #ctx: StoreContext
  readonly #staleLockMs: number

  constructor(ctx: StoreContext, staleLockMs: number) {
    this.#ctx = ctx
    this.#staleLockMs = staleLockMs
  }

  #machine(): Promise<MachineIdentity> {
    // The identity belongs to the process: read it once per file-system seam, not per instance.
    let identity = identities.get(this.#ctx.fs)
    if (!identity) {
      identity = readMachineIdentity(this.#ctx.fs)
      identities.set(this.#ctx.fs, identity)
    }
    return identity
  }

  async acquire(sessionId: string): Promise<HeldLock> {
    const { fs } = this.#ctx
    const dir = join(this.#ctx.root, LOCKS_DIR)
    const path = join(dir, `${encodeSessionId(sessionId)}.lock`)
    const machine = await this.#machine()
    for (let attempt = 0; attempt < 8; attempt++) {
      const owner: LockOwner = {
        pid: process.pid,
        ...machine,
        since: Date.now(),
        staleLockMs: this.#staleLockMs,
        token: uniqueToken(),
      }
      const tmp = join(dir, tmpName())
      // A lock need not be durable (SPEC 5.3): its directory's creation is not synced.
      const { close, ino } = await inEnsuredDir(this.#ctx, dir, false, () => this.#writeLockFile(tmp, owner))
      let tmpExists = true
      try {
        // Closing the temporary file and publishing it are independent: overlap them.
        const [, linkError] = await Promise.all([close(), fs.link(tmp, path).then(() => undefined, (err: unknown) => err)])
        if (linkError !== undefined && errno(linkError) !== 'EEXIST') throw linkError
        if (linkError === undefined) {
          tmpExists = false
          await fs.unlink(tmp).catch(() => {})
          return this.#held(sessionId, path, owner, ino)
        }
        const current = await this.#observe(path)
        if (!current) continue // released meanwhile: try again
        if (!this.#isStale(current, machine)) throw lockedError(sessionId, path, current.owner)
        const marker = join(dir, `.takeover-${current.owner?.token ?? `ino${current.ino}-${current.mtimeMs}`}`)
        try {
          await (await fs.open(marker, 'wx', FILE_MODE)).close()
        } catch (err) {
          if (errno(err) !== 'EEXIST') throw err
          throw lockedError(sessionId, path, current.owner, 'another instance is taking over its stale lock')
        }
        try {
          const still = await this.#observe(path)
          if (!still || still.ino !== current.ino) continue // changed under us: start again
          await fs.rename(tmp, path)
          tmpExists = false
          return this.#held(sessionId, path, owner, ino)
        } finally {
          await fs.unlink(marker).catch(() => {})
        }
      } finally {
        if (tmpExists) await fs.unlink(tmp).catch(() => {})
      }
    }
    throw new SessionPersistenceError('E_LOCKED', `could not take the writer lock of session '${sessionId}'`, {
      sessionId,
      path,
    })
  }

  /**
   * Writes the lock file under `path`; resolves with the function that closes it and the file's
   * inode (which the lock keeps once linked or renamed into place: how a holder knows it still
   * holds it).
   */
  async #writeLockFile(path: string, owner: LockOwner): Promise<{ close: () => Promise<void>; ino: number }> {
    const h = await this.#ctx.fs.open(path, 'wx', FILE_MODE)
    try {
      const [st] = await Promise.all([
        h.stat(),
        h.chmod(FILE_MODE),
        writeAll(h, Buffer.from(`${JSON.stringify(owner)}\n`), 0),
      ])
      return { close: () => h.close(), ino: st.ino }
    } catch (err) {
      await h.close().catch(() => {})
      throw err
    }
  }

  async #observe(path: string): Promise<ObservedLock | undefined> {
    const { fs } = this.#ctx
    let h
    try {
      h = await fs.open(path, 'r')
    } catch (err) {
      if (errno(err) === 'ENOENT') return undefined
      throw err
    }
    try {
      const st = await h.stat()
      const buf = Buffer.alloc(Math.min(st.size, 4096))
      const n = buf.length > 0 ? await h.read(buf, 0, buf.length, 0) : 0
      let owner: LockOwner | undefined
      try {
        const parsed = LockOwnerSchema.safeParse(JSON.parse(buf.toString('utf8', 0, n)))
        owner = parsed.success ? parsed.data : undefined
      } catch {
        owner = undefined // a lock that cannot be read is stale (SPEC 5.3)
      }
      return { owner, ino: st.ino, mtimeMs: st.mtimeMs }
    } finally {
      await h.close()
    }
  }

  #isStale(lock: ObservedLock, machine: MachineIdentity): boolean {
    const { owner } = lock
    if (!owner) return true
    const sameMachine =
      owner.host === machine.host && owner.bootId === machine.bootId && owner.pidNs === machine.pidNs
    if (sameMachine && machine.bootId !== '' && !isPidAlive(owner.pid)) return true
    return Date.now() - lock.mtimeMs > owner.staleLockMs
  }

  #held(sessionId: string, path: string, owner: LockOwner, ino: number): HeldLock {
    const { fs } = this.#ctx
    let lost: SessionPersistenceError | undefined
    let released = false
    const check = async (): Promise<void> => {
      if (lost) throw lost
      let current: number | undefined
      try {
        current = (await fs.stat(path)).ino
      } catch (err) {
        if (errno(err) !== 'ENOENT') throw err
      }
      if (current !== ino) {
        lost = new SessionPersistenceError(
          'E_LOCKED',
          `the writer lock of session '${sessionId}' was ${current === undefined ? 'removed' : 'taken over by another writer'}; nothing more is written by this instance`,
          { sessionId, path },
        )
        throw lost
      }
    }
    const timer = setInterval(() => {
      void check()
        .then(() => (released ? undefined : fs.utimes(path, new Date(), new Date())))
        .catch(() => {})
    }, Math.max(50, Math.floor(owner.staleLockMs / 2)))
    timer.unref()
    return {
      path,
      assertHeld: check,
      async release() {
        if (released) return
        released = true
        clearInterval(timer)
        try {
          await check()
        } catch {
          return // not ours any more: leave the new holder's lock alone
        }
        await fs.unlink(path).catch((err) => {
          if (errno(err) !== 'ENOENT') throw err
        })
      },
    }
  }
}

function lockedError(
  sessionId: string,
  path: string,
  owner: LockOwner | undefined,
  extra?: string,
): SessionPersistenceError {
  const holder = owner ? describeOwner(owner) : 'an unknown holder'
  return new SessionPersistenceError(
    'E_LOCKED',
    `session '${sessionId}' is being written by ${holder}${extra ? ` (${extra})` : ''}`,
    { sessionId, path },
  )
}
