import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { LoadedSession, LoadOptions, SessionPersistence } from '../persistence.js'
import { divergedError } from './plugin-errors.js'
import type { SessionChannel, StoredSlice } from './session-channel.js'

/**
 * Opens sessions for the plugin's appends: creates a new one, adopts a stored log the host's
 * events continue (a resume, a reload, a re-adoption after a broken writer or a lost lock), or
 * finds that the stored log and the host disagree.
 */
export class SessionAdopter {
  readonly #backend: SessionPersistence
  /** Sessions the host opened through `plugin.persistence.load`: id → what that load returned. */
  readonly #hostLoads = new Map<string, StoredSlice>()
  /** Channels whose stored log, read while another instance held its lock, their events continued. */
  readonly #coveredWhileLocked = new WeakSet<SessionChannel>()

  constructor(backend: SessionPersistence) {
    this.#backend = backend
  }

  /**
   * The backend as the host sees it (`plugin.persistence`): a `load` through it is remembered, so
   * the plugin continues from that open state instead of loading the session again.
   */
  observeHostLoads<P extends SessionPersistence>(backend: P): P {
    const hostLoads = this.#hostLoads
    return new Proxy(backend, {
      get(target, prop) {
        if (prop === 'load') {
          return async (id: string, options?: LoadOptions): Promise<LoadedSession> => {
            const loaded = await target.load(id, options)
            hostLoads.set(id, { events: loaded.events, firstSeq: loaded.firstSeq ?? 0 })
            return loaded
          }
        }
        // A session the host closes is no longer held open by it (and only a closed one can be
        // deleted): what its load returned is forgotten. Kept, it held every looked-at session's
        // events for the plugin's life, and a later resume continued from a state that was gone.
        if (prop === 'close') {
          const call = Reflect.get(target, prop, target) as (id: string, ...rest: unknown[]) => Promise<void>
          return async (id: string, ...rest: unknown[]): Promise<void> => {
            await call.call(target, id, ...rest)
            hostLoads.delete(id)
          }
        }
        if (prop === 'closeAll' && typeof (target as { closeAll?: unknown }).closeAll === 'function') {
          return async (): Promise<void> => {
            await (target as unknown as { closeAll(): Promise<void> }).closeAll()
            hostLoads.clear()
          }
        }
        const value = Reflect.get(target, prop, target) as unknown
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  /** Forgets every host load (the plugin is disposed: nothing continues from them). */
  forgetHostLoads(): void {
    this.#hostLoads.clear()
  }

  /**
   * Opens `ch` for appends. Resolves with `undefined` when it is open, or with the error that
   * halts the session for good: a collision (`E_EXISTS`: a stored log the host's events do not
   * continue), a divergence (a re-adopted log that no longer holds what the plugin wrote, or
   * continues differently), a tail seed with no stored log (`E_NOT_FOUND`), or meta the backend
   * refuses. Rejects with a passing failure.
   */
  async open(ch: SessionChannel): Promise<SessionPersistenceError | undefined> {
    await ch.after
    if (ch.reopen) {
      await this.#backend.close(ch.id)
      ch.reopen = false
    } else if (!ch.everOpened) {
      const hostLoaded = this.#hostLoads.get(ch.id)
      if (hostLoaded !== undefined) {
        // The host holds the session open: continue from what its load returned, when the
        // host's seed continues it. (A tail load that starts after the seed cannot tell: read.)
        // Forgotten only once judged: a read that fails here is retried against the same load.
        const stored = await this.#reachBack(ch, hostLoaded)
        this.#hostLoads.delete(ch.id)
        if (!ch.covers(stored)) return mismatch(ch, stored.firstSeq + stored.events.length)
        ch.openedAt(stored.firstSeq + stored.events.length)
        return undefined
      }
    }
    if (ch.cursor === 0) {
      try {
        await this.#backend.create(ch.meta)
        ch.openedAt(0)
        return undefined
      } catch (err) {
        if (isSessionPersistenceError(err, 'E_INVALID_META') || isSessionPersistenceError(err, 'E_INVALID_ID')) return err
        if (!isSessionPersistenceError(err, 'E_EXISTS')) throw err
      }
    }
    return this.#adopt(ch)
  }

  async #adopt(ch: SessionChannel): Promise<SessionPersistenceError | undefined> {
    let loaded: LoadedSession
    try {
      // From a tail, only the log from the last compaction on is read (plus what lies between
      // the channel's first known seq and it); from the start, the whole log.
      loaded = await this.#backend.load(ch.id, ch.knownFrom > 0 ? { closeOpenTurn: false, from: 'last-compaction' } : { closeOpenTurn: false })
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_LOCKED')) {
        // Another instance is writing it. Whether the host's events continue that log can be
        // read without the lock: if they do not, waiting for the lock would only delay the
        // verdict. Read once per channel (a large log is not read again on every retry); the
        // load that finally gets the lock checks again.
        if (!this.#coveredWhileLocked.has(ch)) {
          const events = await this.#readUnlocked(ch)
          if (!ch.covers(events)) return mismatch(ch, events.firstSeq + events.events.length)
          this.#coveredWhileLocked.add(ch)
        }
        throw err
      }
      // A tail seed names events a log must hold: with no log, nothing can be written.
      if (isSessionPersistenceError(err, 'E_NOT_FOUND') && !ch.everOpened && ch.firstSeq > 0) return noLogForTail(ch)
      if (ch.everOpened || !isSessionPersistenceError(err, 'E_SESSION_LIVE')) throw err
      // The host opened it through the backend itself: count what is stored (closers are not).
      // Nothing stored: the host created it (or forked it at 0) and wrote nothing; the first
      // append materializes it, unless the seed is a tail, whose events a log must hold.
      let inspected: LoadedSession
      try {
        inspected = await this.#backend.inspect(ch.id)
      } catch (inspectErr) {
        if (!isSessionPersistenceError(inspectErr, 'E_NOT_FOUND')) throw inspectErr
        if (ch.firstSeq > 0) return noLogForTail(ch)
        ch.openedAt(0)
        return undefined
      }
      // Held open by the host, yet judged as any stored log: a seed that does not continue it is
      // a collision here too (nothing of it is appended).
      const count = inspected.events.length - (inspected.repair?.closers.length ?? 0)
      const held = await this.#reachBack(ch, { events: inspected.events.slice(0, count), firstSeq: inspected.firstSeq ?? 0 })
      if (!ch.covers(held)) return mismatch(ch, held.firstSeq + held.events.length)
      ch.openedAt(held.firstSeq + held.events.length)
      return undefined
    }
    // Open (locked) now: whatever fails before the verdict closes it again, so that the retry
    // loads and judges it anew. Left open, the retry's load said E_SESSION_LIVE, which reads as
    // "the host opened it", and the plugin appended to a log its events did not continue.
    let stored: StoredSlice
    try {
      stored = await this.#reachBack(ch, { events: loaded.events, firstSeq: loaded.firstSeq ?? 0 })
      if (ch.covers(stored)) {
        ch.openedAt(stored.firstSeq + stored.events.length)
        return undefined
      }
    } catch (err) {
      await this.#backend.close(ch.id).catch(() => {})
      throw err
    }
    await this.#backend.close(ch.id)
    return mismatch(ch, stored.firstSeq + stored.events.length)
  }

  /** `stored`, extended back to the channel's first known seq when it starts after it (read, not loaded again). */
  async #reachBack(ch: SessionChannel, stored: StoredSlice): Promise<StoredSlice> {
    const total = stored.firstSeq + stored.events.length
    if (stored.firstSeq <= ch.knownFrom || total <= ch.knownFrom) return stored
    const before = await this.#backend.read(ch.id, { fromSeq: ch.knownFrom, toSeq: stored.firstSeq })
    if (before.firstSeq !== ch.knownFrom || before.events.length !== stored.firstSeq - ch.knownFrom) return stored // covers() refuses it
    return { events: [...before.events, ...stored.events], firstSeq: ch.knownFrom }
  }

  /** The stored log from the channel's first known seq on, without the lock (a torn tail and closers left out). */
  async #readUnlocked(ch: SessionChannel): Promise<StoredSlice> {
    if (ch.knownFrom > 0) {
      const range = await this.#backend.read(ch.id, { fromSeq: ch.knownFrom })
      return { events: range.events, firstSeq: range.firstSeq }
    }
    const inspected = await this.#backend.inspect(ch.id)
    return { events: inspected.events.slice(0, inspected.events.length - (inspected.repair?.closers.length ?? 0)), firstSeq: 0 }
  }
}

/**
 * A stored log the host's events do not continue. While nothing of the host's was ever written
 * (a new session reusing a stored id, a resumed seed that is not that log's, or losing the race
 * to publish it) it is a collision; otherwise the host and the log diverged.
 */
function mismatch(ch: SessionChannel, storedCount: number): SessionPersistenceError {
  if (ch.cursor === ch.firstSeq) {
    return new SessionPersistenceError(
      'E_EXISTS',
      `a log for session '${ch.id}' already exists (${storedCount} events) and the host's events do not continue it${ch.firstSeq > 0 ? ` from seq ${ch.firstSeq}` : ''}; nothing was written`,
      { sessionId: ch.id },
    )
  }
  return divergedError(
    ch.id,
    `adopted again, the stored log holds ${storedCount} events that do not continue the ${ch.cursor} the plugin wrote with the events it holds`,
  )
}

function noLogForTail(ch: SessionChannel): SessionPersistenceError {
  return new SessionPersistenceError(
    'E_NOT_FOUND',
    `session '${ch.id}' was created with a seed from seq ${ch.firstSeq}, but no log of it is stored; nothing was written`,
    { sessionId: ch.id },
  )
}
