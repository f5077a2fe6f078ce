import type { SessionEvent, SessionMeta } from '../../index.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'
import type { LoadedSession, SessionPersistence } from '../../persistence.js'
import { closeTurn, type Draft, openTurn } from './events.js'
import { THREAD_META_FIELD, threadSessionId } from './thread-id.js'
import { ThreadIndex } from './thread-index.js'

/** Resolves after the current macrotask, once the microtasks queued so far (and the ones they queue) have run. */
const linger = () => new Promise<void>((resolve) => setImmediate(resolve))

/** One thread this saver has seen: its session, and its index while the saver holds it. */
export interface Thread {
  readonly threadId: string
  readonly sessionId: string
  /** Set while the thread is open in the backend (its lock held): the index is then current. */
  index: ThreadIndex | undefined
  chain: Promise<unknown>
  /** Calls waiting for their append. */
  queue: QueuedCall[]
  /**
   * The thread's current life: bumped when a call that ends it (`deleteThread`, `release`,
   * `close`, the idle release) is made, so that a flush takes only calls made before it.
   */
  epoch: number
  pending: number
  timer: NodeJS.Timeout | undefined
}

/** What a call appends, made from the thread's index as it stands when its turn comes. */
export type Build = (index: ThreadIndex) => Draft[] | undefined

/** A call whose serialization is done: what makes its events, and how it is settled. */
interface ReadyCall {
  build: Build
  resolve: () => void
  reject: (err: unknown) => void
}

/** The call at `at` of an append could not make its events (nothing was appended; the thread was released). */
class BuildFailure extends Error {
  readonly at: number
  readonly reason: SessionPersistenceError
  constructor(at: number, err: unknown, sessionId: string) {
    super('a call could not make its events')
    this.at = at
    this.reason = isSessionPersistenceError(err)
      ? err
      : new SessionPersistenceError('E_INVALID_EVENT', `the events of a call could not be made: ${err instanceof Error ? err.message : 'it threw'}`, { sessionId, cause: err })
  }
}

/** The backend refused a batch for what its events hold, writing nothing: one of its calls is at fault. */
const isRefusal = (err: unknown) => isSessionPersistenceError(err, 'E_INVALID_EVENT') || isSessionPersistenceError(err, 'E_NOT_JSON')

interface QueuedCall {
  /** The thread's epoch when the call was made. */
  epoch: number
  /** The call's serialization, then what makes its events. */
  ready: Promise<Build>
  resolve: () => void
  reject: (err: unknown) => void
}

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
  /**
   * Threads whose last read found no log (LangGraph's `invoke` reads a thread, then writes it):
   * their first write tries `create` before `load`, saving a lookup. A hint only: `create`
   * refuses (`E_EXISTS`) a log that appeared since, which is then loaded.
   */
  readonly #absent = new Set<string>()

  constructor(persistence: SessionPersistence, idleMs: number, now: () => number) {
    this.#persistence = persistence
    this.#idleMs = idleMs
    this.#now = now
  }

  /** Runs `fn` after every earlier call on the thread has settled; the thread stays open `idleMs` after. */
  run<T>(threadId: string, fn: (t: Thread) => Promise<T>): Promise<T> {
    const thread = this.#thread(threadId)
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

  /**
   * Runs `fn` as `run` does, for a call that ends the thread's current life (its lock released,
   * its log perhaps deleted): the calls made after it, even in the same tick, are appended after
   * it, not taken along by a flush queued before it.
   */
  end<T>(threadId: string, fn: (t: Thread) => Promise<T>): Promise<T> {
    this.#thread(threadId).epoch++
    return this.run(threadId, fn)
  }

  #thread(threadId: string): Thread {
    let t = this.#threads.get(threadId)
    if (!t) {
      // Computed first: an invalid thread id fails here, before anything is tracked.
      const sessionId = threadSessionId(threadId)
      t = { threadId, sessionId, index: undefined, chain: Promise.resolve(), queue: [], epoch: 0, pending: 0, timer: undefined }
      this.#threads.set(threadId, t)
    }
    return t
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
      this.end(t.threadId, (th) => this.release(th)).catch(() => {})
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
    const absent = this.#absent.delete(t.threadId)
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 || !absent) {
        try {
          return await this.#hold(t, await this.#persistence.load(t.sessionId))
        } catch (err) {
          if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
        }
      }
      try {
        await this.#persistence.create(this.#meta(t))
        t.index = new ThreadIndex()
        return t.index
      } catch (err) {
        // Another process materialized it between our load (or read) and our create: load it.
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
      return await this.#hold(t, await this.#persistence.load(t.sessionId))
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_NOT_FOUND')) {
        // Bounded: a hint per thread read and not written since (many reads of absent threads forget them all).
        if (this.#absent.size >= 10_000) this.#absent.clear()
        this.#absent.add(t.threadId)
        return undefined
      }
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
   * Makes a call's events durable: resolves when they are appended. `prepared` is the call's
   * serialization (started when it was called); `build` makes its events from the index as it
   * stands after every earlier call (nothing, for a call that would change nothing). Calls that
   * queue while an append is in flight, or in the macrotask a flush lingers for before it takes
   * the queue, go together in the next append (group commit: with LangGraph's `durability:
   * 'async'` several are in flight at once; with 'sync', a step's `putWrites` and `put`), in call
   * order; each resolves when that append has. A call whose serialization or events fail, or
   * whose events the backend refuses, is rejected alone (see `#commit`); a failure of the append
   * itself (I/O, a lost lock) rejects all the calls it carried. A flush takes
   * only calls made in its own call's epoch: none made after a `deleteThread` or `release` made
   * after its call, which go in an append after that call's.
   */
  submit<T>(threadId: string, prepared: Promise<T>, build: (index: ThreadIndex, prepared: T) => Draft[] | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const ready = prepared.then((value): Build => (index) => build(index, value))
      // A rejected serialization is handled where the flush awaits it.
      ready.catch(() => {})
      // Queued now, so that a flush already waiting in the thread's chain takes it along.
      const thread = this.#thread(threadId)
      const epoch = thread.epoch
      thread.queue.push({ epoch, ready, resolve, reject })
      this.run(threadId, (t) => this.#flush(t, epoch)).catch(reject)
    })
  }

  /** The number of calls at the head of the queue made in `epoch` (epochs only grow along the queue). */
  #leading(t: Thread, epoch: number): number {
    let n = 0
    while (n < t.queue.length && t.queue[n]!.epoch === epoch) n++
    return n
  }

  async #flush(t: Thread, epoch: number): Promise<void> {
    // Taken by an earlier flush of the same epoch; calls of a later epoch wait for their own.
    if (this.#leading(t, epoch) === 0) return
    // Linger one macrotask before taking the queue: with `durability: 'sync'` LangGraph calls a
    // super-step's `put` in the same macrotask as its task's `putWrites` (a few promise hops
    // later), so both go in one append, one sync, instead of two in a row.
    await linger()
    const queued = t.queue.splice(0, this.#leading(t, epoch))
    const ready: ReadyCall[] = []
    for (const call of queued) {
      try {
        ready.push({ build: await call.ready, resolve: call.resolve, reject: call.reject })
      } catch (err) {
        call.reject(err)
      }
    }
    await this.#commit(t, ready)
  }

  /**
   * Appends the calls in one append and settles each. A call whose events cannot be made is
   * rejected alone and the others go without it. When the backend refuses the batch for what
   * it holds (`E_INVALID_EVENT`: a line over 64 MiB, §15.5; `E_NOT_JSON`), nothing was
   * written: each call is then appended on its own, so only the one at fault is rejected. Any
   * other failure (I/O, a lost lock) is no call's fault and rejects them all.
   */
  async #commit(t: Thread, calls: readonly ReadyCall[]): Promise<void> {
    let group = calls
    for (;;) {
      // Nothing left (every serialization failed): the thread need not even be opened.
      if (group.length === 0) return
      try {
        await this.#appendAll(t, group.map((c) => c.build))
      } catch (err) {
        if (err instanceof BuildFailure) {
          group[err.at]!.reject(err.reason)
          group = group.filter((_, i) => i !== err.at)
          continue
        }
        if (group.length > 1 && isRefusal(err)) {
          for (const call of group) await this.#commit(t, [call])
          return
        }
        for (const call of group) call.reject(err)
        return
      }
      for (const call of group) call.resolve()
      return
    }
  }

  /** One append (one turn) of what the calls build, each against the index after the ones before it. */
  async #appendAll(t: Thread, builds: readonly Build[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const index = await this.writable(t)
      const first = index.count
      const time = this.#now()
      const turn = index.turn + 1
      const events: SessionEvent[] = []
      const add = (drafts: readonly Draft[]) => {
        const added = drafts.map((d, i) => ({ seq: first + events.length + i, type: d.type, time, data: d.data }) as SessionEvent)
        events.push(...added)
        // Taken into the index now, so the next call builds on it; dropped below if the append fails.
        index.apply(added, t.sessionId)
      }
      add([openTurn(turn)])
      for (let i = 0; i < builds.length; i++) {
        try {
          add(builds[i]!(index) ?? [])
        } catch (err) {
          // The index took the calls before it (perhaps part of this one), none of it stored.
          await this.release(t)
          throw new BuildFailure(i, err, t.sessionId)
        }
      }
      if (events.length === 1) {
        // Nothing to write: undo the opened turn (the index holds no record of it but its number).
        index.count = first
        index.turn = turn - 1
        return
      }
      add([closeTurn(turn)])
      try {
        await this.#persistence.append(t.sessionId, events)
        return
      } catch (err) {
        // Whatever failed (a refusal, lost lock, broken writer, failed I/O, a log that appeared):
        // the index took events that are not stored; start again from the log.
        await this.release(t)
        if (isSessionPersistenceError(err, 'E_EXISTS') && first === 0 && attempt === 0) continue
        throw err
      }
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

  /**
   * Whether the thread has a log, checking it is this thread's: `E_EXISTS` for a session at its
   * id whose header names no thread or another (as reads refuse it). Reads the header only.
   */
  async ownedLog(t: Thread): Promise<boolean> {
    if (t.index) return true
    let meta: SessionMeta
    try {
      const p = this.#persistence
      meta = typeof p.read === 'function' ? (await p.read(t.sessionId, { toSeq: 0 })).meta : (await p.inspect(t.sessionId)).meta
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_NOT_FOUND')) return false
      throw err
    }
    this.#checkOwner(t, meta)
    return true
  }

  /** Releases every thread, after the calls already made on it. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#threads.values()].map((t) => this.end(t.threadId, (th) => this.release(th))))
  }

  async #hold(t: Thread, loaded: LoadedSession): Promise<ThreadIndex> {
    try {
      this.#checkOwner(t, loaded.meta)
      t.index = ThreadIndex.fromEvents(loaded.events, t.sessionId)
      return t.index
    } catch (err) {
      // Loaded means locked: let go of a session that is not this thread's, or not readable as
      // one, before rejecting, so the next call does not find it still open (E_SESSION_LIVE).
      await this.#persistence.close(t.sessionId).catch(() => {})
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
