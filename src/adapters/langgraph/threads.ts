import type { SessionEvent, SessionMeta } from '../../index.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'
import type { LoadedSession, SessionPersistence } from '../../persistence.js'
import { asTurn, type Draft } from './events.js'
import { THREAD_META_FIELD, threadSessionId } from './thread-id.js'
import { ThreadIndex } from './thread-index.js'

/** One thread this saver has seen: its session, and its index while the saver holds it. */
export interface Thread {
  readonly threadId: string
  readonly sessionId: string
  /** Set while the thread is open in the backend (its lock held): the index is then current. */
  index: ThreadIndex | undefined
  chain: Promise<unknown>
  pending: number
  timer: NodeJS.Timeout | undefined
}

/** Failures of an append that wrote nothing and leave the session as it was. */
const REFUSALS = new Set(['E_NOT_JSON', 'E_INVALID_EVENT'])

/**
 * The threads of a saver: each one's calls run one at a time, in call order; a thread is opened
 * (loaded, so locked) on first use, its index built from that one read and kept current by each
 * append, and closed `idleMs` after its last call, which releases its lock.
 */
export class Threads {
  readonly #persistence: SessionPersistence
  readonly #idleMs: number
  readonly #now: () => number
  readonly #threads = new Map<string, Thread>()

  constructor(persistence: SessionPersistence, idleMs: number, now: () => number) {
    this.#persistence = persistence
    this.#idleMs = idleMs
    this.#now = now
  }

  /** Runs `fn` after every earlier call on the thread has settled; the thread stays open `idleMs` after. */
  run<T>(threadId: string, fn: (t: Thread) => Promise<T>): Promise<T> {
    let t = this.#threads.get(threadId)
    if (!t) {
      // Computed first: an invalid thread id fails here, before anything is tracked.
      const sessionId = threadSessionId(threadId)
      t = { threadId, sessionId, index: undefined, chain: Promise.resolve(), pending: 0, timer: undefined }
      this.#threads.set(threadId, t)
    }
    const thread = t
    thread.pending++
    if (thread.timer) clearTimeout(thread.timer)
    thread.timer = undefined
    const result = thread.chain.then(() => fn(thread))
    thread.chain = result.then(
      () => this.#settled(thread),
      () => this.#settled(thread),
    )
    return result
  }

  #settled(t: Thread): void {
    if (--t.pending > 0) return
    if (!t.index) {
      if (this.#threads.get(t.threadId) === t) this.#threads.delete(t.threadId)
      return
    }
    if (this.#idleMs === Infinity) return
    t.timer = setTimeout(() => {
      t.timer = undefined
      // A failed close is not worth an unhandled rejection: the next use opens the thread again.
      this.run(t.threadId, (th) => this.release(th)).catch(() => {})
    }, this.#idleMs)
    t.timer.unref()
  }

  /** The ids of the threads this saver holds open now. */
  heldThreadIds(): string[] {
    return [...this.#threads.values()].filter((t) => t.index).map((t) => t.threadId)
  }

  /** The thread's index, opening it for writing: loaded (locked), or created when it has no log yet. */
  async writable(t: Thread): Promise<ThreadIndex> {
    if (t.index) return t.index
    for (let attempt = 0; ; attempt++) {
      try {
        return this.#hold(t, await this.#persistence.load(t.sessionId))
      } catch (err) {
        if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
      }
      try {
        await this.#persistence.create(this.#meta(t))
        t.index = new ThreadIndex()
        return t.index
      } catch (err) {
        // Another process materialized it between our load and our create: load it.
        if (!isSessionPersistenceError(err, 'E_EXISTS') || attempt > 0) throw err
      }
    }
  }

  /**
   * The thread's index for reading: the held one, or the thread opened as for a write; when
   * another instance holds it, a snapshot read without a lock (not kept). Undefined when the
   * thread has no log.
   */
  async readable(t: Thread): Promise<ThreadIndex | undefined> {
    if (t.index) return t.index
    try {
      return this.#hold(t, await this.#persistence.load(t.sessionId))
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_NOT_FOUND')) return undefined
      if (!isSessionPersistenceError(err, 'E_LOCKED') && !isSessionPersistenceError(err, 'E_SESSION_LIVE')) throw err
    }
    return this.snapshot(t)
  }

  /** The held index, or a lock-free read of the log (`inspect`), never kept. */
  async snapshot(t: Thread): Promise<ThreadIndex | undefined> {
    if (t.index) return t.index
    let loaded: LoadedSession
    try {
      loaded = await this.#persistence.inspect(t.sessionId)
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_NOT_FOUND')) return undefined
      throw err
    }
    this.#checkOwner(t, loaded.meta)
    // `inspect` closes a torn turn in memory; its closers are turn events, which the index skips.
    return ThreadIndex.fromEvents(loaded.events, t.sessionId)
  }

  /**
   * Appends what `build` makes of the current index as one turn, durably, and takes it into the
   * index. `build` returning nothing appends nothing. If the thread's log appeared meanwhile
   * (another process materialized it first), the thread is loaded and `build` asked again.
   */
  async write(t: Thread, build: (index: ThreadIndex) => Draft[] | undefined): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const index = await this.writable(t)
      const drafts = build(index)
      if (!drafts || drafts.length === 0) return
      const time = this.#now()
      const events = asTurn(index.turn + 1, drafts).map(
        (d, i) => ({ seq: index.count + i, type: d.type, time, data: d.data }) as SessionEvent,
      )
      try {
        await this.#persistence.append(t.sessionId, events)
      } catch (err) {
        if (isSessionPersistenceError(err) && REFUSALS.has(err.code)) throw err
        // Lost lock, broken writer, failed I/O, a log that appeared: start again from the log.
        await this.release(t)
        if (isSessionPersistenceError(err, 'E_EXISTS') && index.count === 0 && attempt === 0) continue
        throw err
      }
      index.apply(events, t.sessionId)
      return
    }
  }

  /** Closes the thread in the backend (releasing its lock) and forgets its index. */
  async release(t: Thread): Promise<void> {
    if (!t.index) return
    t.index = undefined
    try {
      await this.#persistence.close(t.sessionId)
    } catch {
      // Closing releases what it can; the next use loads the thread again, reconciling from the log.
    }
  }

  /** Releases every thread, after the calls already made on it. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#threads.values()].map((t) => this.run(t.threadId, (th) => this.release(th))))
  }

  #hold(t: Thread, loaded: LoadedSession): ThreadIndex {
    try {
      this.#checkOwner(t, loaded.meta)
      t.index = ThreadIndex.fromEvents(loaded.events, t.sessionId)
      return t.index
    } catch (err) {
      // Loaded means locked: let go of a session that is not this thread's, or not readable as one.
      void this.#persistence.close(t.sessionId).catch(() => {})
      throw err
    }
  }

  #checkOwner(t: Thread, meta: SessionMeta): void {
    const owner = meta[THREAD_META_FIELD]
    if (owner !== t.threadId) {
      throw new SessionPersistenceError(
        'E_EXISTS',
        `session ${t.sessionId} is not the log of LangGraph thread ${JSON.stringify(t.threadId)} (its header names ${JSON.stringify(owner ?? null)})`,
        { sessionId: t.sessionId },
      )
    }
  }

  #meta(t: Thread): SessionMeta {
    return { id: t.sessionId, createdAt: this.#now(), delegationDepth: 0, [THREAD_META_FIELD]: t.threadId }
  }
}
