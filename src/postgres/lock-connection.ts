import pg from 'pg'
import { describeServer, type ResolvedPostgresConfig } from './config.js'
import { connectFailure } from './db.js'
import { SerialOps } from '../session/serial.js'

// Session-level advisory locks: held until unlocked or until the connection ends, however it
// ends (a killed process, a terminated backend). That makes them the liveness signal of a
// holder; the writer epoch in the session's row (append-batch.ts) is what fences it.
const TRY_LOCK = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS locked'
const UNLOCK = 'SELECT pg_advisory_unlock(hashtextextended($1, 0)) AS unlocked'

/** The key of a session's advisory lock: the schema is part of it, so teams sharing a database never collide. */
export function sessionKey(schema: string, id: string): string {
  return `${schema}/${id}`
}

/** Server-side TCP keepalives of the lock connection (settable by any user, per session). */
export const LOCK_CONNECTION_KEEPALIVES =
  'SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; SET tcp_user_timeout = 30000'

/**
 * Opens a store's lock connection: its own connection, never a pool slot (with a caller's pool
 * it uses the pool's settings), so a small pool cannot be starved by the locks it holds. It
 * gives up connecting after `connectTimeoutMs` (a connection error, `ETIMEDOUT`).
 */
export function lockClientOpener(c: ResolvedPostgresConfig, applicationName: string): () => Promise<OpenedLockClient> {
  const server = describeServer(c)
  return async () => {
    const settings = c.pool ? { ...(c.pool.options as pg.ClientConfig) } : { connectionString: c.connectionString }
    const client = new pg.Client({ ...settings, application_name: applicationName, connectionTimeoutMillis: c.connectTimeoutMs })
    client.on('error', () => {})
    await client.connect().catch((err: unknown) => {
      throw connectFailure(err, c.connectTimeoutMs, server)
    })
    // The server drops this connection, and with it our advisory locks, about 30 s after our
    // host stops answering (a power loss), instead of after Linux's default two hours of
    // keepalive silence: a dead host's sessions become writable elsewhere that soon.
    await client.query(LOCK_CONNECTION_KEEPALIVES)
    return { client, close: () => client.end() }
  }
}

/**
 * The keys the lock connections of this process hold, each with how many hold it (several
 * stores may share a process): E_LOCKED (session-row.ts) uses it to tell a row that records
 * this process as a holder none of its stores is any more from one that records it rightly.
 */
const heldHere = new Map<string, number>()

/** Whether some store of this process holds the lock of `key` on its live lock connection. */
export function heldInThisProcess(key: string): boolean {
  return heldHere.has(key)
}

/** A store's held keys, kept in the process's count as they come and go. */
class HeldKeys extends Set<string> {
  override add(key: string): this {
    if (!this.has(key)) heldHere.set(key, (heldHere.get(key) ?? 0) + 1)
    return super.add(key)
  }

  override delete(key: string): boolean {
    if (!super.delete(key)) return false
    const n = heldHere.get(key) ?? 0
    if (n <= 1) heldHere.delete(key)
    else heldHere.set(key, n - 1)
    return true
  }

  override clear(): void {
    for (const key of [...this]) this.delete(key)
  }
}

export interface OpenedLockClient {
  client: pg.ClientBase
  /** Ends the connection (and with it every lock it holds). */
  close(): Promise<void>
}

/**
 * The one dedicated connection of an instance on which it holds its sessions' advisory locks.
 * Nothing else runs on it, so it is never busy when a lock is wanted, and a pool recycling its
 * connections can never drop a lock by accident.
 */
export class LockConnection {
  readonly #open: () => Promise<OpenedLockClient>
  #connecting: Promise<OpenedLockClient> | undefined
  #current: OpenedLockClient | undefined
  /** Keys held on the current connection. */
  readonly #held = new HeldKeys()
  /** Keys that were held on a connection that died: to take again when possible. */
  readonly #orphans = new Set<string>()
  /**
   * Orphans being taken again right now, each with a promise that settles once its re-take is
   * over (taken, or let go again), and those of them released meanwhile (to let go).
   */
  readonly #retaking = new Map<string, Promise<void>>()
  readonly #dropped = new Set<string>()
  /** Keys whose lock query is in flight. */
  readonly #taking = new Set<string>()
  #reacquiring: Promise<void> | undefined
  #ended = false
  /** One query at a time on the connection (pg 9 refuses overlapping queries on one client). */
  readonly #serial = new SerialOps()

  readonly #stillOurs: (key: string) => Promise<boolean>

  /** `stillOurs(key)`: after a re-take, whether the session is still ours (else the lock goes). */
  constructor(open: () => Promise<OpenedLockClient>, stillOurs: (key: string) => Promise<boolean> = async () => true) {
    this.#open = open
    this.#stillOurs = stillOurs
  }

  /** False after the connection died while holding locks that are not taken again yet. */
  get healthy(): boolean {
    return this.#orphans.size === 0
  }

  async #get(): Promise<OpenedLockClient> {
    if (this.#ended) throw new Error('the lock connection was ended')
    if (this.#current) return this.#current
    this.#connecting ??= this.#open().then(
      (opened) => {
        const dead = () => this.#dead(opened)
        opened.client.on('error', dead)
        opened.client.on('end', dead)
        this.#current = opened
        this.#connecting = undefined
        return opened
      },
      (err: unknown) => {
        this.#connecting = undefined
        throw err
      },
    )
    return this.#connecting
  }

  #dead(opened: OpenedLockClient): void {
    if (this.#current !== opened) return
    this.#current = undefined
    for (const key of this.#held) this.#orphans.add(key)
    this.#held.clear()
    opened.close().catch(() => {})
  }

  /**
   * Takes the lock of `key` without waiting; false when another connection holds it, or when
   * this one holds it or is taking it already: advisory locks are re-entrant, so a second take
   * would need a second unlock, and the one unlock of its holder would leave it held for good.
   * A key the re-take pass is taking again (its session closed meanwhile, say, and now loaded
   * or deleted again) is waited for first: the pass lets go of a key released meanwhile, so the
   * caller is never refused on account of this instance's own re-take.
   */
  async tryLock(key: string): Promise<boolean> {
    this.#orphans.delete(key)
    for (let retake = this.#retaking.get(key); retake; retake = this.#retaking.get(key)) await retake
    return this.#take(key)
  }

  async #take(key: string): Promise<boolean> {
    this.#orphans.delete(key)
    if (this.#held.has(key) || this.#taking.has(key)) return false
    this.#taking.add(key)
    try {
      const opened = await this.#get()
      const { rows } = await this.#serial.run(() => opened.client.query<{ locked: boolean }>(TRY_LOCK, [key]))
      const locked = rows[0]?.locked === true
      if (locked) {
        if (this.#current === opened) this.#held.add(key)
        else return false // the connection died while answering: the lock went with it
      }
      return locked
    } finally {
      this.#taking.delete(key)
    }
  }

  /** Whether the lock of `key` is held on the live connection right now (no I/O). */
  holds(key: string): boolean {
    return this.#held.has(key)
  }

  async unlock(key: string): Promise<void> {
    this.#orphans.delete(key)
    if (this.#retaking.has(key)) this.#dropped.add(key)
    if (!this.#held.delete(key)) return
    const opened = this.#current
    if (!opened) return
    // A dead connection released it anyway.
    await this.#serial.run(() => opened.client.query(UNLOCK, [key])).catch(() => {})
  }

  /**
   * After the connection died (a network cut, a server restart), takes the orphaned locks
   * again, so the holder is seen alive once more. Best effort: whoever took one meanwhile has
   * also moved the session's writer epoch, and the epoch is what rejects our next batch.
   */
  reacquire(): Promise<void> {
    // One pass at a time: two passes taking one key would hold it twice (advisory locks are
    // re-entrant), and one unlock would not release it.
    this.#reacquiring ??= this.#reacquirePass().finally(() => {
      this.#reacquiring = undefined
    })
    return this.#reacquiring
  }

  async #reacquirePass(): Promise<void> {
    for (const key of [...this.#orphans]) {
      // Taken again by a new holder, or released, while the pass was busy: not an orphan any more.
      if (!this.#orphans.delete(key)) continue
      let over!: () => void
      this.#retaking.set(key, new Promise<void>((resolve) => (over = resolve)))
      try {
        try {
          await this.#take(key)
        } catch {
          if (!this.#dropped.delete(key)) this.#orphans.add(key)
          return
        }
        // Its session was closed while the lock was being taken again, or another host took it
        // meanwhile (this holder is fenced): let it go rather than look alive for it.
        if (this.#dropped.delete(key) || (this.#held.has(key) && !(await this.#stillOurs(key).catch(() => true)))) {
          this.#retaking.delete(key) // so that this unlock does not mark it dropped again
          await this.unlock(key)
        }
      } finally {
        this.#retaking.delete(key)
        this.#dropped.delete(key) // a release seen while it was let go anyway: nothing left to drop
        over()
      }
    }
  }

  async end(): Promise<void> {
    this.#ended = true
    const opened = this.#current ?? (await this.#connecting?.catch(() => undefined))
    this.#current = undefined
    this.#held.clear()
    this.#orphans.clear()
    await opened?.close()
  }
}
