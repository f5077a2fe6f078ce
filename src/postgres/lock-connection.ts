import pg from 'pg'
import { APPLICATION_NAME_PREFIX, describeServer, type ResolvedPostgresConfig } from './config.js'
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
 * A store's application_name (config.ts applicationNameOf: the prefix and its host) as the lock
 * connection (and the listening one) carries it: in printable ASCII, at most 63 bytes. E_LOCKED
 * (session-row.ts) reads the host of a lock's holder back from it, and operators find a host's
 * locks by it. The server keeps an application_name in printable ASCII only (any other byte
 * becomes '?', or a \xNN escape from PostgreSQL 16 on), so each byte of the name's UTF-8 outside
 * it is written %XX instead ('hôte' is 'h%C3%B4te'); a printable ASCII name is left as it is, so
 * this changes nothing for one, nor for a name already written so.
 */
export function lockConnectionName(applicationName: string): string {
  let ascii = ''
  for (const byte of Buffer.from(applicationName, 'utf8')) {
    ascii += byte >= 0x20 && byte <= 0x7e ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return ascii.slice(0, 63)
}

/**
 * The host a lock connection's name (lockConnectionName) gives, or undefined for a name that is
 * no store's. Its %XX of bytes 80 to FF are read back as the UTF-8 they spell (were they no
 * UTF-8, as a host written with such a '%' of its own would be, the name is taken as it is). A
 * name cut at 63 bytes gives the start of its host (a cut escape or character left out).
 */
export function hostOfLockConnectionName(name: string): string | undefined {
  if (!name.startsWith(APPLICATION_NAME_PREFIX)) return undefined
  const written = name.slice(APPLICATION_NAME_PREFIX.length)
  if (!/%[89A-F][0-9A-F]/.test(written)) return written
  const encoded = written.replace(/%[89A-F]?$/, '')
  const bytes: number[] = []
  for (let i = 0; i < encoded.length; i++) {
    const escaped = encoded[i] === '%' && /^[89A-F][0-9A-F]$/.test(encoded.slice(i + 1, i + 3))
    bytes.push(escaped ? Number.parseInt(encoded.slice(i + 1, i + 3), 16) : encoded.charCodeAt(i))
    if (escaped) i += 2
  }
  try {
    // Streaming: an unfinished UTF-8 sequence at the end (the name was cut) is held back, not an error.
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes), { stream: true })
  } catch {
    return written
  }
}

// Names the connection after it is connected, so that nothing in a connection string (its
// `application_name`, which pg lets override the one it is given) can rename it, and reads which
// backend of which server it is (lockBackend).
const NAME_AND_BACKEND = `
  SELECT set_config('application_name', $1, false), pg_backend_pid() AS pid,
         extract(epoch FROM pg_postmaster_start_time())::text AS started`

/**
 * Which backend of which server a connection is: the server's start time (its epoch, the same
 * in every time zone) and the backend's pid, unique among the live connections of one server.
 * A lock's holder in pg_locks is told by it from this process's lock connections (heldHere).
 */
export function lockBackend(started: string, pid: number): string {
  return `${started}/${pid}`
}

/**
 * Opens a store's lock connection: its own connection, never a pool slot (with a caller's pool
 * it uses the pool's settings), so a small pool cannot be starved by the locks it holds. It
 * gives up connecting after `connectTimeoutMs` (a connection error, `ETIMEDOUT`). It is named
 * lockConnectionName(applicationName) whatever the settings say.
 */
export function lockClientOpener(c: ResolvedPostgresConfig, applicationName: string): () => Promise<OpenedLockClient> {
  const server = describeServer(c)
  const name = lockConnectionName(applicationName)
  return async () => {
    const settings = c.pool ? { ...(c.pool.options as pg.ClientConfig) } : { connectionString: c.connectionString }
    const client = new pg.Client({ ...settings, application_name: name, connectionTimeoutMillis: c.connectTimeoutMs })
    client.on('error', () => {})
    await client.connect().catch((err: unknown) => {
      throw connectFailure(err, c.connectTimeoutMs, server)
    })
    let backend: string
    try {
      const { rows } = await client.query<{ pid: number; started: string }>(NAME_AND_BACKEND, [name])
      backend = lockBackend(rows[0]!.started, rows[0]!.pid)
      // The server drops this connection, and with it our advisory locks, about 30 s after our
      // host stops answering (a power loss), instead of after Linux's default two hours of
      // keepalive silence: a dead host's sessions become writable elsewhere that soon.
      await client.query(LOCK_CONNECTION_KEEPALIVES)
    } catch (err) {
      await client.end().catch(() => {})
      throw err
    }
    storeHosts.set(c.host, (storeHosts.get(c.host) ?? 0) + 1)
    let closed = false
    const close = () => {
      if (!closed) {
        closed = true
        const n = storeHosts.get(c.host) ?? 0
        if (n <= 1) storeHosts.delete(c.host)
        else storeHosts.set(c.host, n - 1)
      }
      return client.end()
    }
    return { client, backend, close }
  }
}

/**
 * The hosts of this process's stores with a connection open (opened by lockClientOpener), each
 * with how many: a session's row names this process only when it records this pid and one of
 * these hosts (a pid alone is shared by processes of other machines, say pid 1 in containers).
 */
const storeHosts = new Map<string, number>()

/** Whether a store of this process with `host` has a connection open. */
export function storeOfThisProcess(host: string): boolean {
  return storeHosts.has(host)
}

/**
 * The locks the lock connections of this process hold, by backend (lockBackend) and key, each
 * with how many hold it: E_LOCKED (session-row.ts) uses it to tell a row that records this
 * process as a holder none of its stores is any more from one that records it rightly. The
 * backend is part of it: a store of this process holding the same key on another server (or
 * another database, through another connection) says nothing of who holds it here.
 */
const heldHere = new Map<string, number>()

/** Whether the lock of `key` held by the connection `backend` (lockBackend) is one a store of this process holds. */
export function heldInThisProcess(key: string, backend: string): boolean {
  return heldHere.has(`${backend} ${key}`)
}

/** A store's held keys on its current connection (of `backend`), kept in the process's count as they come and go. */
class HeldKeys extends Set<string> {
  #backend = ''

  /** The backend of the connection the keys are held on from now (none are held when it changes). */
  set backend(backend: string) {
    this.clear()
    this.#backend = backend
  }

  override add(key: string): this {
    const entry = `${this.#backend} ${key}`
    if (!this.has(key)) heldHere.set(entry, (heldHere.get(entry) ?? 0) + 1)
    return super.add(key)
  }

  override delete(key: string): boolean {
    if (!super.delete(key)) return false
    const entry = `${this.#backend} ${key}`
    const n = heldHere.get(entry) ?? 0
    if (n <= 1) heldHere.delete(entry)
    else heldHere.set(entry, n - 1)
    return true
  }

  override clear(): void {
    for (const key of [...this]) this.delete(key)
  }
}

export interface OpenedLockClient {
  client: pg.ClientBase
  /** Which backend of which server it is (lockBackend); unknown ('') when opened otherwise (tests). */
  backend?: string
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
        this.#held.backend = opened.backend ?? ''
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
        // The connection died while answering: the lock went with it. That says nothing of
        // anyone else (false would read as "another instance holds it", E_LOCKED): it is a
        // connection failure, which the caller's retry takes again on a new connection.
        if (this.#current !== opened) throw Object.assign(new Error('the lock connection was terminated while the lock was being taken'), { code: 'ECONNRESET' })
        this.#held.add(key)
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
