import { createHash } from 'node:crypto'
import type { Logger } from '../session/schema.js'
import { backoff } from './db.js'
import type { OpenedLockClient } from './lock-connection.js'

/**
 * The NOTIFY channel of a schema: `spj_` and the first 24 hex digits of the SHA-256 of its name
 * (a channel name is an identifier of at most 63 bytes; a schema name alone may take all of them).
 * Every statement that stores or deletes lines notifies it in its own transaction, so a
 * notification is delivered exactly when what it announces has committed.
 */
export function changeChannel(schema: string): string {
  return `spj_${createHash('sha256').update(schema).digest('hex').slice(0, 24)}`
}

/**
 * How a notification names a session: the first 32 hex digits of the SHA-256 of its id's UTF-8
 * bytes, never the id itself (any role that can connect to the database may LISTEN on any
 * channel: another team's role sees that sessions change, not which) and never a line (payloads
 * are limited to 8000 bytes). A payload names one session, or several separated by spaces.
 */
export function changePayload(id: string): string {
  let payload = payloads.get(id)
  if (payload === undefined) {
    payload = createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 32)
    if (payloads.size >= 4096) payloads.clear() // the sessions a process writes at once are far fewer
    payloads.set(id, payload)
  }
  return payload
}

/** Computed once per session, not once per batch: every statement names its sessions. */
const payloads = new Map<string, string>()

/**
 * The one listening connection of a store, shared by all its watchers (§15.3): opened with the
 * first watcher, `LISTEN`s to the schema's channel, and wakes the watchers of the sessions each
 * notification names (by their payloads). Ended with the last watcher. When it fails it is
 * opened again (with a backoff) while watchers remain, and every watcher is woken once it
 * listens again, since notifications sent meanwhile were lost, and not before (a watcher woken
 * while the server is down would only read a server that cannot answer); the watchers' own
 * safety poll covers the gap.
 */
export class ChangeFeed {
  readonly #open: () => Promise<OpenedLockClient>
  readonly #channel: string
  readonly #logger: Logger
  /** The watchers of each session, by its change payload. */
  readonly #watchers = new Map<string, Set<() => void>>()
  #connection: Promise<OpenedLockClient | undefined> | undefined
  #ended = false

  constructor(open: () => Promise<OpenedLockClient>, schema: string, logger: Logger) {
    this.#open = open
    this.#channel = changeChannel(schema)
    this.#logger = logger
  }

  /** Calls `wake` at each sign that `id` changed, until the returned function is called. */
  subscribe(id: string, wake: () => void): () => void {
    const key = changePayload(id)
    let set = this.#watchers.get(key)
    if (!set) this.#watchers.set(key, (set = new Set()))
    set.add(wake)
    this.#connect()
    return () => {
      set.delete(wake)
      if (set.size === 0 && this.#watchers.get(key) === set) this.#watchers.delete(key)
      if (this.#watchers.size === 0) void this.#disconnect()
    }
  }

  /** Wakes every watcher (they read again) and closes the connection. */
  end(): Promise<void> {
    this.#ended = true
    this.#wakeAll()
    return this.#disconnect()
  }

  #wakeAll(): void {
    for (const set of this.#watchers.values()) for (const wake of set) wake()
  }

  #connect(attempt = 0): void {
    if (this.#connection || this.#ended || this.#watchers.size === 0) return
    // Its body runs up to its first await before `connection` is assigned, and reads it only after.
    let connection!: Promise<OpenedLockClient | undefined>
    connection = (async () => {
      let opened: OpenedLockClient | undefined
      try {
        opened = await this.#open()
        const gone = () => {
          if (this.#connection !== connection) return
          this.#connection = undefined
          opened!.close().catch(() => {})
          // No wake here: the server may be down (a restart), and a watcher woken now would only
          // read a server that cannot answer. They are all woken once this listens again, and
          // meanwhile their safety poll reads (and retries, watch-session.ts) as it would anyway.
          void backoff(0).then(() => this.#connect())
        }
        opened.client.on('error', gone)
        opened.client.on('end', gone)
        opened.client.on('notification', (n: { channel: string; payload?: string }) => {
          if (n.channel !== this.#channel || n.payload === undefined) return
          // One notification may name several sessions (a group statement's), space-separated.
          for (const key of n.payload.split(' ')) for (const wake of this.#watchers.get(key) ?? []) wake()
        })
        await opened.client.query(`LISTEN "${this.#channel}"`)
        if (this.#connection !== connection) {
          await opened.close().catch(() => {}) // ended, or the last watcher left, while connecting
          return undefined
        }
        this.#wakeAll() // changes made before LISTEN took effect were not notified to us
        return opened
      } catch (err) {
        await opened?.close().catch(() => {})
        if (this.#connection === connection) {
          this.#connection = undefined
          if (attempt === 0) this.#logger.warn(`watch: cannot listen for changes (${(err as Error).message}); polling until it can`)
          void backoff(attempt).then(() => this.#connect(attempt + 1))
        }
        return undefined
      }
    })()
    this.#connection = connection
  }

  async #disconnect(): Promise<void> {
    const connection = this.#connection
    this.#connection = undefined
    const opened = await connection
    await opened?.close().catch(() => {})
  }
}
