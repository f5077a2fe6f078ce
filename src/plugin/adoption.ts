import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { LoadedSession, LoadOptions, SessionPersistence } from '../persistence.js'
import { divergedError } from './plugin-errors.js'
import type { SessionChannel } from './session-channel.js'

/**
 * Opens sessions for the plugin's appends: creates a new one, adopts a stored log the host's
 * events continue (a resume, a reload, a re-adoption after a broken writer or a lost lock), or
 * finds that the stored log and the host disagree.
 */
export class SessionAdopter {
  readonly #backend: SessionPersistence
  /** Sessions the host opened through `plugin.persistence.load`: id → stored event count. */
  readonly #hostLoads = new Map<string, number>()
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
            hostLoads.set(id, loaded.events.length)
            return loaded
          }
        }
        const value = Reflect.get(target, prop, target) as unknown
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
  }

  /**
   * Opens `ch` for appends. Resolves with `undefined` when it is open, or with the error that
   * halts the session for good: a collision (`E_EXISTS`: a stored log the host's events do not
   * continue), a divergence (a re-adopted log that no longer holds what the plugin wrote, or
   * continues differently), or meta the backend refuses. Rejects with a passing failure.
   */
  async open(ch: SessionChannel): Promise<SessionPersistenceError | undefined> {
    await ch.after
    if (ch.reopen) {
      await this.#backend.close(ch.id)
      ch.reopen = false
    } else if (!ch.everOpened) {
      const hostLoaded = this.#hostLoads.get(ch.id)
      if (hostLoaded !== undefined) {
        this.#hostLoads.delete(ch.id)
        ch.openedAt(hostLoaded)
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
    let stored: LoadedSession['events']
    try {
      stored = (await this.#backend.load(ch.id, { closeOpenTurn: false })).events
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_LOCKED')) {
        // Another instance is writing it. Whether the host's events continue that log can be
        // read without the lock: if they do not, waiting for the lock would only delay the
        // verdict. Read once per channel (a large log is not read again on every retry); the
        // load that finally gets the lock checks again.
        if (!this.#coveredWhileLocked.has(ch)) {
          const inspected = await this.#backend.inspect(ch.id)
          const events = inspected.events.slice(0, inspected.events.length - (inspected.repair?.closers.length ?? 0))
          if (!ch.covers(events)) return mismatch(ch, events.length)
          this.#coveredWhileLocked.add(ch)
        }
        throw err
      }
      if (ch.everOpened || !isSessionPersistenceError(err, 'E_SESSION_LIVE')) throw err
      // The host opened it through the backend itself: count what is stored (closers are not).
      const inspected = await this.#backend.inspect(ch.id)
      ch.openedAt(inspected.events.length - (inspected.repair?.closers.length ?? 0))
      return undefined
    }
    if (ch.covers(stored)) {
      ch.openedAt(stored.length)
      return undefined
    }
    await this.#backend.close(ch.id)
    return mismatch(ch, stored.length)
  }
}

/**
 * A stored log the host's events do not continue. While nothing of the host's was ever written
 * (a new session reusing a stored id, or losing the race to publish it) it is a collision;
 * otherwise the host and the log diverged.
 */
function mismatch(ch: SessionChannel, storedCount: number): SessionPersistenceError {
  if (ch.cursor === 0) {
    return new SessionPersistenceError(
      'E_EXISTS',
      `a log for session '${ch.id}' already exists and the host's events do not continue it; nothing was written`,
      { sessionId: ch.id },
    )
  }
  return divergedError(
    ch.id,
    `adopted again, the stored log holds ${storedCount} events that do not continue the ${ch.cursor} the plugin wrote with the events it holds`,
  )
}
