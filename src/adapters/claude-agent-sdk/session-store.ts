import { isAbsolute } from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  isSessionPersistenceError,
  SessionFormatUnsupportedError,
  SessionPersistenceCorruptionError,
  SessionPersistenceError,
  type SessionEvent,
  type SessionMeta,
} from '../../index.js'
import { assertEntry, entryError, entryEvent, entryOf } from './entry-events.js'
import { isPlainJson, isPlainObject } from '../../session/json-check.js'
import {
  assertKey,
  deleteCovers,
  describeKey,
  KEY_FIELD,
  parseKey,
  parseProjectKey,
  sessionIdOf,
  storedKeyOf,
  type StoredKey,
} from './session-key.js'
import { type ResolvedOptions, resolveOptions, type SessionStoreOptions } from './store-options.js'
import type { SdkSessionStore, SessionKey, SessionStoreEntry } from './types.js'

/** The SDK's `SessionStore` over a `SessionPersistence`, plus a way to release every session. */
export interface ClaudeSessionStore extends SdkSessionStore {
  /** Waits for pending appends, then closes every session the store has open (releasing their locks). */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** One key the store has touched: its session, and what appends need while it is open. */
interface Tracked {
  readonly id: string
  readonly key: StoredKey
  /** Open for appends in the persistence (loaded or created by this store). */
  open: boolean
  nextSeq: number
  /** The uuids stored in the session: an entry whose uuid is here is not stored again. */
  seen: Set<string>
  /** Operations on this key run one at a time, in call order. */
  tail: Promise<void>
  busy: number
  /** The idle-close timer: armed once, and moved on when it fires early (not rearmed per append). */
  timer: NodeJS.Timeout | undefined
  /** When the key's last operation ended (`performance.now()`): the idle time runs from here. */
  lastUse: number
}

// Refusals of the batch itself: nothing was written and the session is as it was.
const BATCH_REFUSALS = new Set(['E_NOT_JSON', 'E_INVALID_EVENT'])
const noop = () => {}
const MAX_REMEMBERED_IDS = 4096

/**
 * A copy of `value`'s plain JSON parts (arrays and plain objects, cycles kept as cycles); what
 * is not plain JSON stays as it is, so the backend refuses it (`E_NOT_JSON`, at its path) as it
 * would the original.
 */
function copyJsonParts(value: unknown, copies: Map<object, unknown>): unknown {
  if (typeof value !== 'object' || value === null) return value
  const done = copies.get(value)
  if (done !== undefined) return done
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return value
    const out: unknown[] = []
    copies.set(value, out)
    for (let i = 0; i < value.length; i++) out.push(copyJsonParts(value[i], copies))
    return out
  }
  if (!isPlainObject(value)) return value
  const out: Record<string, unknown> = {}
  copies.set(value, out)
  for (const key of Object.keys(value)) {
    // Defined, not assigned: an own `__proto__` key (JSON.parse makes them) stays a key.
    Object.defineProperty(out, key, { value: copyJsonParts(value[key], copies), enumerable: true, writable: true, configurable: true })
  }
  return out
}

/**
 * The batch as it is at the call, for an append that reaches the backend later (after an open,
 * or queued behind another): changing the entries after the call changes nothing stored.
 */
function captured(entries: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  // structuredClone would turn a class instance into a plain object, and throws on a function.
  return (isPlainJson(entries) ? structuredClone(entries) : copyJsonParts(entries, new Map())) as Record<string, unknown>[]
}

/** One name per main key (length-prefixed parts, whatever they hold): what a key's subkeys share. */
function sessionName(key: StoredKey): string {
  return `${key.projectKey.length}:${key.projectKey}${key.sessionId.length}:${key.sessionId}`
}

/** Whether `key` (not yet checked) is an object with exactly the parts of `k`. */
function hasParts(key: unknown, k: StoredKey): boolean {
  if (typeof key !== 'object' || key === null || Array.isArray(key)) return false
  const o = key as Record<string, unknown>
  return o.projectKey === k.projectKey && o.sessionId === k.sessionId && o.subpath === k.subpath
}

/**
 * The SDK shows only an error's message (in its `mirror_error`): a package error is rethrown
 * with its code and the key in front of the message, keeping code, holder and the original as
 * `cause`.
 */
function withCode(err: unknown, key: StoredKey): unknown {
  if (!isSessionPersistenceError(err)) return err
  const holder = (err as { holder?: { pid: number; host: string; since: number } }).holder
  const wrapped = new SessionPersistenceError(err.code, `${err.code}: Claude Agent SDK session ${describeKey(key)}: ${err.message}`, {
    sessionId: err.sessionId,
    path: err.path,
    cause: err,
    ...(holder ? { holder } : {}),
  })
  // A subclass stays one, with its fields (`E_CORRUPT`'s line, byte and reason; an unsupported
  // format's version): a host checks `instanceof` and reads them (§9).
  if (err instanceof SessionPersistenceCorruptionError || err instanceof SessionFormatUnsupportedError) {
    Object.setPrototypeOf(wrapped, Object.getPrototypeOf(err))
    wrapped.name = err.name
    const fields = err instanceof SessionPersistenceCorruptionError ? { line: err.line, byteOffset: err.byteOffset, reason: err.reason } : { version: err.version }
    for (const [k, v] of Object.entries(fields)) Object.defineProperty(wrapped, k, { value: v, enumerable: true })
  }
  return wrapped
}

/**
 * A Claude Agent SDK `SessionStore` (pass it as `sessionStore` to `query()`) over any
 * `SessionPersistence`: each key is one session, each entry one event, durable when `append`
 * resolves. A session is held (locked) only while it is written: `idleCloseMs` after its last
 * append the store closes it, so another host can resume it.
 */
export function createSessionStore(options: SessionStoreOptions): ClaudeSessionStore {
  return new Store(resolveOptions(options))
}

class Store implements ClaudeSessionStore {
  readonly #o: ResolvedOptions
  readonly #tracked = new Map<string, Tracked>()
  readonly #ids = new Map<string, string>()
  /** The key of the last append, while it is tracked. */
  #last: Tracked | undefined
  /**
   * The deletes of main keys not yet ended (each one's end), by `sessionName`: a key of that
   * session the store starts tracking meanwhile was called after the delete, and waits for it.
   */
  readonly #deleting = new Map<string, Promise<void>>()

  constructor(options: ResolvedOptions) {
    this.#o = options
  }

  /**
   * Stores the entries durably, in order; resolves when they are durable. Entries whose `uuid`
   * the session already holds (an SDK retry, an `importSessionToStore` replay), or that repeat
   * a `uuid` earlier in the batch, are not stored again; entries without `uuid` always are.
   * `append(key, [])` writes nothing. Rejects with the backend's error, never dropping silently:
   * `E_LOCKED` when another instance or host writes the session.
   */
  append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void> {
    let t: Tracked
    let batch: Record<string, unknown>[]
    try {
      // The SDK appends to one key after another: the last key's parts, checked then, are
      // compared, not checked and hashed again.
      const last = this.#last
      const k = last !== undefined && hasParts(key, last.key) ? undefined : parseKey(key)
      const id = k === undefined ? last!.id : this.#idOf(k)
      if (!Array.isArray(entries)) {
        throw new SessionPersistenceError('E_INVALID_EVENT', 'append: entries must be an array of entry objects', { sessionId: id })
      }
      if (entries.length === 0) return Promise.resolve()
      // With the session open and nothing queued, the batch reaches the backend on this call's
      // stack, so the backend captures it before the caller can change it; the entries are
      // checked in the same pass that maps them (an invalid one undoes the pass).
      const open = k === undefined ? last : this.#tracked.get(id)
      if (open?.open && open.busy === 0) {
        this.#last = open
        return this.#run(open, () => this.#closingIfNoIdle(open, this.#write(open, entries as Record<string, unknown>[], true)))
      }
      // Otherwise they are checked before the key is tracked or anything is queued, and
      // captured: the backend sees them only after an open or the appends ahead of them.
      for (let i = 0; i < entries.length; i++) assertEntry(entries[i], i, id)
      try {
        batch = captured(entries as Record<string, unknown>[])
      } catch (err) {
        // Nested past what the copy can recurse into: refused as the backend refuses it.
        if (!(err instanceof RangeError)) throw err
        throw new SessionPersistenceError('E_NOT_JSON', `append: an entry is nested too deeply to check (${err.message})`, { sessionId: id })
      }
      t = k === undefined ? last! : this.#track(id, k)
      this.#last = t
    } catch (err) {
      return Promise.reject(err)
    }
    return this.#run(t, () => this.#closingIfNoIdle(t, this.#append(t, batch)))
  }

  /**
   * With `idleCloseMs: 0`, the session is closed before the append settles, resolved or refused
   * (its lock free then). A close that fails is reported to `onError`, as the idle close reports
   * it: the append itself was made durable, and a rejection would make the SDK store it again.
   */
  async #closingIfNoIdle(t: Tracked, appended: Promise<void>): Promise<void> {
    try {
      await appended
    } finally {
      if (this.#o.idleCloseMs === 0 && t.open) await this.#drop(t).catch((err: unknown) => this.#report(withCode(err, t.key), t.key))
    }
  }

  /** The entries appended under `key`, deep-equal and in order; `null` for a key never written. */
  async load(key: SessionKey): Promise<SessionStoreEntry[] | null> {
    const k = parseKey(key)
    const id = this.#idOf(k)
    // A key not tracked is read at once, unless a delete of its main key called before is pending.
    const t = this.#tracked.get(id) ?? (this.#deleting.size > 0 && this.#deleting.has(sessionName(k)) ? this.#track(id, k) : undefined)
    // A read takes no lock (`inspect`), so readers never keep a writer from a session.
    const read = async () => {
      let events: readonly SessionEvent[]
      try {
        const loaded = await this.#o.persistence.inspect(id)
        assertKey(loaded.meta, k, id)
        events = loaded.events
      } catch (err) {
        if (isSessionPersistenceError(err, 'E_NOT_FOUND')) return null
        throw err
      }
      const entries: SessionStoreEntry[] = []
      for (const e of events) {
        const entry = entryOf(e)
        if (entry) entries.push(entry as SessionStoreEntry)
      }
      return entries
    }
    // A read is no use of the lock: the idle time still runs from the last append.
    return t ? this.#run(t, read, false) : read()
  }

  /** The main transcripts of `projectKey`, with their last write time (integer epoch ms, floored as the SDK asks); `[]` for none. */
  async listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>> {
    const project = parseProjectKey(projectKey)
    const out: Array<{ sessionId: string; mtime: number }> = []
    for (const listing of await this.#o.persistence.list()) {
      const k = storedKeyOf(listing.meta)
      if (k?.projectKey === project && k.subpath === undefined) out.push({ sessionId: k.sessionId, mtime: Math.floor(listing.mtimeMs) })
    }
    return out
  }

  /** The subpaths stored under a session (its subagent transcripts), sorted; never the main one. */
  async listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]> {
    const k = parseKey({ projectKey: (key as SessionKey | null)?.projectKey, sessionId: (key as SessionKey | null)?.sessionId })
    const out: string[] = []
    for (const listing of await this.#o.persistence.list()) {
      const s = storedKeyOf(listing.meta)
      if (s?.projectKey === k.projectKey && s.sessionId === k.sessionId && s.subpath !== undefined) out.push(s.subpath)
    }
    return out.sort()
  }

  /**
   * Deletes `key`'s session durably; for a main key (no `subpath`), its subkeys too, and
   * nothing else. A key that holds nothing is not an error. Rejects with `E_LOCKED` when another
   * instance is writing one of them (what was deleted before stays deleted; call again).
   *
   * In call order with the operations on the keys it covers: those called before it (on the key,
   * on its subkeys, also ones not yet stored) are done, and so deleted, before it lists what to
   * delete; those called after it wait for it (an append acknowledged, then deleted, would be
   * acknowledged data lost).
   */
  async delete(key: SessionKey): Promise<void> {
    const k = parseKey(key)
    const own = this.#idOf(k)
    // Its place, taken at the call (nothing awaited before): a slot on the queue of every
    // tracked key it covers, and of its own key, held until it ends. An operation called before
    // it is ahead of the slot; one called after it, behind. A key of the session first tracked
    // after the call waits for its end (`#track`); one never tracked has nothing pending.
    const reserved = new Set<Tracked>()
    for (const t of this.#tracked.values()) if (deleteCovers(k, t.key)) reserved.add(t)
    reserved.add(this.#track(own, k))
    let end!: () => void
    const ended = new Promise<void>((resolve) => (end = resolve))
    const arrivals = [...reserved].map((t) => this.#hold(t, ended))
    // Set after its own key is tracked, which must not wait for this delete.
    const session = k.subpath === undefined ? sessionName(k) : undefined
    if (session !== undefined) this.#deleting.set(session, ended)
    try {
      // Every operation called before it on those keys has ended: what they stored is listed.
      await Promise.all(arrivals)
      const ids = new Set<string>()
      const listed = new Set<string>()
      for (const listing of await this.#o.persistence.list()) {
        listed.add(listing.meta.id)
        const s = storedKeyOf(listing.meta)
        if (s !== undefined && deleteCovers(k, s)) ids.add(listing.meta.id)
      }
      // Subkeys first: a delete cut short leaves the main transcript, which a new call finds again.
      const order = [...ids].filter((id) => id !== own)
      // The key's own session id, unless it is listed holding another key (another integration's
      // session, or a hash collision: load and append refuse it with E_EXISTS, and so does this
      // leave it). One not listed (none, or a log whose header cannot be read) is deleted as before.
      if (ids.has(own) || !listed.has(own)) order.push(own)
      for (const id of order) {
        const t = this.#tracked.get(id)
        // Reserved, or a key it covers tracked after the call (waiting for it, so not open): it
        // holds their queues. Any other (a session under an id not its key's) is queued as before.
        if (t === undefined || reserved.has(t) || deleteCovers(k, t.key)) await this.#remove(t, id)
        else await this.#run(t, () => this.#remove(t, id))
      }
    } finally {
      if (session !== undefined && this.#deleting.get(session) === ended) this.#deleting.delete(session)
      end()
    }
  }

  /**
   * Queues a slot on the key that holds its queue until `until` settles; resolves when the slot
   * is reached (the operations ahead of it have ended). Not a use of the key: its idle time
   * still runs from its last append.
   */
  #hold(t: Tracked, until: Promise<void>): Promise<void> {
    return new Promise<void>((reached) => {
      void this.#run(
        t,
        () => {
          reached()
          return until
        },
        false,
      )
    })
  }

  /** Closes the session if the store has it open, then deletes it; one already gone is no error. */
  async #remove(t: Tracked | undefined, id: string): Promise<void> {
    if (t?.open) await this.#drop(t)
    try {
      await this.#o.persistence.delete(id)
    } catch (err) {
      if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#tracked.values()].map((t) => this.#run(t, () => this.#drop(t))))
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** The key's session id (two hashes and an encoding), remembered for the keys in use. */
  #idOf(key: StoredKey): string {
    // Length-prefixed parts: one name per key, whatever the parts hold.
    const name = `${sessionName(key)}${key.subpath === undefined ? '-' : `${key.subpath.length}:${key.subpath}`}`
    let id = this.#ids.get(name)
    if (id === undefined) {
      id = sessionIdOf(key)
      if (this.#ids.size >= MAX_REMEMBERED_IDS) this.#ids.clear()
      this.#ids.set(name, id)
    }
    return id
  }

  #track(id: string, key: StoredKey): Tracked {
    let t = this.#tracked.get(id)
    if (!t) {
      t = { id, key, open: false, nextSeq: 0, seen: new Set(), tail: Promise.resolve(), busy: 0, timer: undefined, lastUse: 0 }
      this.#tracked.set(id, t)
      // Called after a delete of its main key that has not ended: its operations come after it.
      const deleting = this.#deleting.size > 0 ? this.#deleting.get(sessionName(key)) : undefined
      if (deleting !== undefined) void this.#run(t, () => deleting, false)
    }
    return t
  }

  /**
   * Runs `job` after the key's earlier operations; at once (same stack) when none is pending.
   * When the last one ends, the key's idle time starts (or, closed, the key is forgotten): that
   * bookkeeping runs before the caller's continuation (its reaction is registered first).
   */
  #run<T>(t: Tracked, job: () => Promise<T>, use = true): Promise<T> {
    t.busy++
    let p: Promise<T>
    try {
      p = t.busy === 1 ? job() : t.tail.then(job)
    } catch (err) {
      p = Promise.reject(err)
    }
    const ended = () => {
      // Recorded at each append's end, also one with operations queued behind it (a load).
      if (use) t.lastUse = performance.now()
      if (--t.busy > 0) return
      if (!t.open) {
        this.#tracked.delete(t.id)
        if (this.#last === t) this.#last = undefined
        return
      }
      const now = performance.now()
      if (t.timer === undefined) this.#armIdleClose(t, Math.max(0, Math.ceil(t.lastUse + this.#o.idleCloseMs - now)))
    }
    t.tail = p.then(ended, ended)
    return p
  }

  /**
   * Closes the key when it has been idle for `idleCloseMs`. One timer per open key, armed when
   * it falls idle; an append meanwhile does not touch it: the timer, firing, waits the rest of
   * the idle time counted from the last operation's end.
   */
  #armIdleClose(t: Tracked, ms: number): void {
    t.timer = setTimeout(() => {
      t.timer = undefined
      if (t.busy > 0 || !t.open) return // the operation's end arms it again
      const left = t.lastUse + this.#o.idleCloseMs - performance.now()
      if (left > 1) {
        this.#armIdleClose(t, Math.ceil(left))
        return
      }
      this.#run(t, () => this.#drop(t)).catch((err) => this.#report(err, t.key))
    }, ms)
    t.timer.unref?.()
  }

  /** Hands an error to `onError`; a listener that throws never replaces the error itself. */
  #report(err: unknown, key: StoredKey): void {
    try {
      this.#o.onError(err, { ...key })
    } catch {
      // The rejection the caller gets is the store's error, not the listener's.
    }
  }

  /** Stores the batch's new entries; a rejection carries the code and key in its message. */
  #append(t: Tracked, entries: readonly Record<string, unknown>[]): Promise<void> {
    if (t.open) return this.#write(t, entries)
    return this.#open(t, entries).then(
      () => this.#write(t, entries),
      (err: unknown) => {
        throw this.#rejected(err, t)
      },
    )
  }

  /** The error a rejected append carries (code and key in its message), reported to `onError`. */
  #rejected(err: unknown, t: Tracked): unknown {
    const clear = withCode(err, t.key)
    this.#report(clear, t.key)
    return clear
  }

  /**
   * One pass over the batch: the entries whose uuid is new (to the session and to the batch)
   * become events, and their uuids are remembered at once, so nothing is left to do once the
   * backend has written (what runs after the write's wait runs on cold caches). A failure
   * undoes that: a refused batch forgets its uuids, anything else closes the session.
   */
  #write(t: Tracked, entries: readonly Record<string, unknown>[], check = false): Promise<void> {
    const seen = t.seen
    const firstSeq = t.nextSeq
    let added: string[] | undefined
    // Nothing was written and the session is as it was: forget what this batch remembered.
    const undo = () => {
      t.nextSeq = firstSeq
      if (added) for (const uuid of added) seen.delete(uuid)
    }
    const events: SessionEvent[] = []
    try {
      const time = this.#o.now()
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i]!
        if (check && !isPlainObject(entry)) {
          undo()
          // A refusal of the call, as when it is checked before the queue: not reported.
          return Promise.reject(entryError(entry, i, t.id))
        }
        const uuid = entry.uuid
        if (typeof uuid === 'string') {
          // One lookup, not two (`has`, then `add`): the size tells whether it was new.
          const size = seen.size
          if (seen.add(uuid).size === size) continue
          ;(added ??= []).push(uuid)
        }
        events.push(entryEvent(entry, firstSeq + events.length, time))
      }
    } catch (err) {
      undo()
      return Promise.reject(this.#rejected(err, t))
    }
    if (events.length === 0) return Promise.resolve()
    t.nextSeq = firstSeq + events.length
    let written: Promise<void>
    try {
      written = this.#o.persistence.append(t.id, events)
    } catch (err) {
      written = Promise.reject(err)
    }
    return written.catch(async (err: unknown) => {
      if (isSessionPersistenceError(err) && BATCH_REFUSALS.has(err.code)) undo()
      // Anything else: close, so the next append (the SDK's retry) reads the log again,
      // learning what is stored (the uuids), and takes the lock again.
      else await this.#drop(t).catch(noop)
      throw this.#rejected(err, t)
    })
  }

  /** Opens the key's session for appends: loads it (the lock, the uuids it holds) or creates it. */
  async #open(t: Tracked, firstBatch: readonly Record<string, unknown>[]): Promise<void> {
    const { persistence } = this.#o
    for (let attempt = 0; ; attempt++) {
      try {
        const loaded = await persistence.load(t.id, { closeOpenTurn: false })
        try {
          assertKey(loaded.meta, t.key, t.id)
        } catch (err) {
          await persistence.close(t.id).catch(noop)
          throw err
        }
        t.seen = new Set()
        for (const e of loaded.events) {
          const uuid = entryOf(e)?.uuid
          if (typeof uuid === 'string') t.seen.add(uuid)
        }
        t.nextSeq = loaded.events.length
        t.open = true
        return
      } catch (err) {
        if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
      }
      try {
        await persistence.create(this.#metaOf(t, firstBatch))
        t.seen = new Set()
        t.nextSeq = 0
        t.open = true
        return
      } catch (err) {
        // Another instance stored the session between our load and create: load it.
        if (!isSessionPersistenceError(err, 'E_EXISTS') || attempt > 0) throw err
      }
    }
  }

  #metaOf(t: Tracked, firstBatch: readonly Record<string, unknown>[]): SessionMeta {
    const meta: SessionMeta = { id: t.id, createdAt: this.#o.now(), delegationDepth: 0 }
    // The project directory the SDK records on its entries, for `session-jsonl ls` and buckets.
    const cwd = firstBatch.find((e) => typeof e.cwd === 'string' && isAbsolute(e.cwd))?.cwd
    if (typeof cwd === 'string') meta.cwd = cwd
    if (t.key.subpath !== undefined) {
      // A subagent transcript is delegated from its main transcript (`session-jsonl tree`).
      meta.parentSession = sessionIdOf({ projectKey: t.key.projectKey, sessionId: t.key.sessionId })
      meta.delegationDepth = 1
    }
    meta[KEY_FIELD] = { ...t.key }
    return meta
  }

  async #drop(t: Tracked): Promise<void> {
    if (!t.open) return
    t.open = false
    if (t.timer !== undefined) {
      clearTimeout(t.timer)
      t.timer = undefined
    }
    t.seen = new Set()
    await this.#o.persistence.close(t.id)
  }
}
