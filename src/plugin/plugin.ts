import { EventEmitter } from 'eventemitter3'
import { defaultLogger } from '../session/logger.js'
import type { Logger } from '../session/schema.js'
import { printable, valueName } from '../session/value-name.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import type { JsonlSessionPersistence, SessionPersistence } from '../persistence.js'
import { SessionAdopter } from './adoption.js'
import { BufferBudget } from './buffer-budget.js'
import { type BackendPluginConfig, type JsonlPluginConfig, parsePluginConfig, type PluginConfig } from './config.js'
import { type AgentHost, type HostSessionEvents, isAgentHost } from './host.js'
import { HostIntake } from './host-intake.js'
import { asPersistenceError, disposedError } from './plugin-errors.js'
import { type DrainContext, SessionDrainer } from './session-drain.js'
import type { SessionChannel } from './session-channel.js'
import { type DeadlineOptions, parseDeadline, type SessionWork, settleBy, startDeadline } from './deadline.js'

export const PLUGIN_NAME = 'session-persistence-jsonl'

export interface PluginEvents {
  /** A failed background drain (once when it starts or its code changes), a seq gap, a refused event, a collision, a dropped or late event. */
  error: [error: SessionPersistenceError]
  /** Drains of `sessionId` succeed again after the failure reported as `after`. */
  recovered: [sessionId: string, after: SessionPersistenceError]
}

export interface SessionPersistencePlugin<P extends SessionPersistence = SessionPersistence> extends EventEmitter<PluginEvents> {
  readonly name: typeof PLUGIN_NAME
  /** The backend the plugin writes to (the JSONL backend unless another was given). Hosts resume through its `load`. */
  readonly persistence: P
  apply(host: AgentHost): Promise<void>
  /**
   * Resolves when every event received before the call (for `sessionId`, or for all sessions)
   * is durable. With `timeoutMs`, rejects with `E_TIMEOUT` (per session, in an `AggregateError`
   * for all) once it has passed without the backend answering; what was not written stays
   * buffered, in order, and is written when the backend answers.
   */
  flush(sessionId?: string, options?: DeadlineOptions): Promise<void>
  /**
   * Drains everything received, closes every session, unsubscribes. With `timeoutMs`, settles by
   * then: each session not made durable is named in the `AggregateError` (`E_TIMEOUT` for those
   * whose backend did not answer), everything else is released.
   */
  dispose(options?: DeadlineOptions): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * The plugin an agent host registers (docs/contract.md §8): it buffers the host's session
 * events on the host's call path and drains them into the persistence, one p-queue per session.
 * `plugin.persistence` has the backend's own type: the JSONL backend for a root, `P` for `{persistence: P}`.
 */
export function sessionPersistencePlugin<P extends SessionPersistence>(config: BackendPluginConfig<P>): SessionPersistencePlugin<P>
export function sessionPersistencePlugin(config: JsonlPluginConfig): SessionPersistencePlugin<JsonlSessionPersistence>
export function sessionPersistencePlugin(config: PluginConfig): SessionPersistencePlugin
export function sessionPersistencePlugin(config: PluginConfig): SessionPersistencePlugin {
  return new Plugin(config)
}

class Plugin extends EventEmitter<PluginEvents> implements SessionPersistencePlugin {
  readonly name = PLUGIN_NAME
  readonly persistence: SessionPersistence
  readonly #backend: SessionPersistence
  readonly #ownsBackend: boolean
  readonly #logger: Logger
  readonly #adopter: SessionAdopter
  readonly #drainer: SessionDrainer
  readonly #intake: HostIntake
  #applied = false
  #seeding: Promise<unknown> = Promise.resolve()
  #disposed = false
  /** The one disposal every `dispose` call settles by its own deadline. */
  #disposal: Disposal | undefined
  /** The deadline of the first `dispose` that timed out on a backend that did not answer: nothing is written after it. */
  #abandonedAfterMs: number | undefined

  constructor(config: PluginConfig) {
    super()
    const parsed = parsePluginConfig(config)
    if (parsed.kind === 'backend') {
      this.#backend = parsed.persistence
      this.#ownsBackend = false
    } else {
      const { kind: _k, flushDelayMs: _f, maxBufferedBytes: _m, ...jsonl } = parsed
      this.#backend = createJsonlPersistence(jsonl)
      this.#ownsBackend = true
    }
    this.#logger = parsed.logger ?? defaultLogger(PLUGIN_NAME)
    const adopter = new SessionAdopter(this.#backend)
    this.#adopter = adopter
    this.persistence = adopter.observeHostLoads(this.#backend)
    const ctx: DrainContext = {
      backend: this.#backend,
      adopter,
      flushDelayMs: parsed.flushDelayMs,
      isDisposed: () => this.#disposed,
      abandonedAfterMs: () => this.#abandonedAfterMs,
      report: (error) => this.#report(error),
      recovered: (sessionId, after) => this.#recovered(sessionId, after),
    }
    this.#drainer = new SessionDrainer(ctx)
    this.#intake = new HostIntake(ctx, this.#drainer, new BufferBudget(parsed.maxBufferedBytes))
  }

  async apply(host: AgentHost): Promise<void> {
    if (this.#disposed) throw disposedError('apply')
    if (this.#applied) {
      throw new SessionPersistenceError('E_CONFIG', 'this plugin is already applied to a host; create one plugin per host')
    }
    if (!isAgentHost(host)) {
      throw new SessionPersistenceError('E_CONFIG', 'apply needs an AgentHost: sessionEvents with on(name, listener) and off(name, listener), and liveSessions()')
    }
    this.#applied = true
    try {
      this.#seeding = this.#intake.subscribe(host)
    } catch (err) {
      this.#applied = false // the host's liveSessions() failed before anything was subscribed
      throw err
    }
    await this.#seeding
  }

  async flush(sessionId?: string, options?: DeadlineOptions): Promise<void> {
    const timeoutMs = parseDeadline(options, 'flush')
    if (this.#disposed) throw disposedError('flush')
    if (sessionId !== undefined && typeof sessionId !== 'string') {
      throw new SessionPersistenceError('E_INVALID_ID', `flush takes a session id (a string) or nothing, not ${valueName(sessionId)}`)
    }
    const one = sessionId === undefined ? undefined : this.#intake.find(sessionId)
    if (sessionId !== undefined && !one) {
      throw new SessionPersistenceError('E_NOT_FOUND', `the plugin does not track session '${sessionId}'`, { sessionId })
    }
    const channels = one ? [one] : this.#intake.all()
    const deadline = startDeadline(timeoutMs)
    // A drain that outlives the deadline goes on: when the backend answers, its batch is
    // counted as written (or kept and retried), so nothing is lost or written twice.
    // A session disposed by the host (draining, then closing) is flushed once it is closed too:
    // its lock released, so the host can resume it at once (a load right after session/disposed
    // said E_SESSION_LIVE while the close was still on its way).
    const work = channels.map((ch): SessionWork<SessionChannel> => ({
      key: ch,
      id: ch.id,
      done: settled(this.#drainer.drain(ch).then(() => ch.closing), ch.id),
    }))
    const failed = await settleBy(work, deadline, 'flush').finally(() => deadline?.cancel())
    if (one) {
      if (failed[0]) throw failed[0].error
      return
    }
    if (failed.length > 0) throw aggregate('flush failed for', failed)
  }

  dispose(options?: DeadlineOptions): Promise<void> {
    let timeoutMs: number | undefined
    try {
      timeoutMs = parseDeadline(options, 'dispose')
    } catch (err) {
      return Promise.reject(err)
    }
    this.#disposal ??= this.#startDisposal()
    return this.#settleDisposal(this.#disposal, timeoutMs)
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /**
   * From now on nothing is accepted; every session drains once more and is closed (its lock
   * released), then the owned backend is closed. Runs once, whatever each caller's deadline.
   */
  #startDisposal(): Disposal {
    this.#disposed = true
    const all = this.#intake.all()
    for (const ch of all) ch.clearTimers()
    // A session's durability is its final drain; its close comes after it and is waited for by
    // `finished` only: a close that hangs is not "events not made durable".
    const work = all.map((ch): SessionWork<SessionChannel> => ({ key: ch, id: ch.id, done: this.#finalDrain(ch) }))
    const closed = all.map((ch, i) => work[i]!.done.then(() => this.#finalClose(ch)))
    let released: Promise<void> | undefined
    const release = () => (released ??= this.#release())
    // Apply's seeding is part of each channel's drain (its queue); waited for before the release.
    const finished = Promise.all(closed)
      .then(() => this.#seeding.catch(() => {}))
      .then(release)
    return { work, finished, release }
  }

  /** The session's final drain; settles with the error that left its events not durable. */
  async #finalDrain(ch: SessionChannel): Promise<SessionPersistenceError | undefined> {
    if (ch.closing) {
      // Disposed by the host already: its drain-then-close runs; its durability is the drain
      // (its close is waited for by `finished`, as every session's).
      await ch.drained
      return ch.closedWith
    }
    return settled(this.#drainer.drain(ch), ch.id)
  }

  /** The session's close after its final drain (a failure is reported); its buffers released. */
  async #finalClose(ch: SessionChannel): Promise<void> {
    if (ch.closing) return ch.closing
    ch.clearTimers()
    await ch.queue.add(() => this.#backend.close(ch.id)).catch((err) => this.#report(asPersistenceError(err, ch.id)))
    ch.dropBuffered()
  }

  /**
   * Closes the owned backend (releasing every lock left) and unsubscribes from the host. A failed
   * close loses no event (the drains have settled, or were given up at the deadline): it is
   * reported, as at session/disposed.
   */
  async #release(): Promise<void> {
    if (this.#ownsBackend) await (this.#backend as JsonlSessionPersistence).closeAll().catch((err: unknown) => this.#report(closeAllError(err)))
    this.#detach()
  }

  #detach(): void {
    this.#intake.channels.clear()
    this.#intake.closing.clear()
    this.#intake.unsubscribe()
    this.#adopter.forgetHostLoads()
  }

  async #settleDisposal(d: Disposal, timeoutMs: number | undefined): Promise<void> {
    const deadline = startDeadline(timeoutMs)
    try {
      const failed = await settleBy(d.work, deadline, 'dispose')
      if (failed.some((f) => f.error.code === 'E_TIMEOUT')) {
        // The backend does not answer for some sessions: release everything else now. Their
        // writes in flight go on and close them (releasing their locks) when the backend
        // answers; nothing is written after those (what they still buffer is named here).
        this.#abandonedAfterMs ??= timeoutMs
        void d.release()
        this.#detach()
      } else if (!(await settledBy(d.finished, deadline))) {
        // Every event is durable; only closing hangs (a session's, or the backend's). Not a
        // durability failure. Everything else is released now: the owned backend's closeAll
        // starts every close at once (a session the host opened itself included), whatever one
        // close that hangs is waiting for.
        void d.release()
        this.#detach()
        this.#report(new SessionPersistenceError('E_TIMEOUT', `dispose: closing the persistence did not finish within ${timeoutMs} ms; every event was made durable`))
      }
      // A collision is not a durability failure: the host's events were never the log's.
      const failures = failed.filter((f) => f.error.code !== 'E_EXISTS')
      if (failures.length > 0) throw aggregate('dispose could not make durable the events of', failures)
    } finally {
      deadline?.cancel()
    }
  }

  #report(error: SessionPersistenceError): void {
    if (this.listenerCount('error') > 0) this.#emitToHost('error', `${error.code}: ${error.message}`, error)
    else this.#logger.warn(`${error.code}: ${error.message}`)
  }

  /** To 'recovered' listeners; else to the logger where the failure itself went (no 'error' listener either). */
  #recovered(sessionId: string, after: SessionPersistenceError): void {
    const what = `session '${sessionId}': drains succeed again after ${after.code}`
    if (this.listenerCount('recovered') > 0) this.#emitToHost('recovered', what, sessionId, after)
    else if (this.listenerCount('error') === 0) this.#logger.warn(what)
  }

  /**
   * Emits a report to the host's listeners, which are called in the middle of the plugin's own
   * bookkeeping (a drain's failure, a close): a listener that throws must not leave it half done
   * (a retry never armed, a buffer never bounded, a rejection nobody handles). Its exception goes
   * to the logger, beside what it was told.
   */
  #emitToHost(event: 'error' | 'recovered', what: string, ...args: [SessionPersistenceError] | [string, SessionPersistenceError]): void {
    try {
      ;(this.emit as (event: string, ...args: unknown[]) => boolean)(event, ...args)
    } catch (err) {
      this.#logger.warn(`the host's '${event}' listener threw (${printable(err)}) when told: ${what}`)
    }
  }
}

interface Disposal {
  readonly work: readonly SessionWork<SessionChannel>[]
  /** Every session drained and closed, and the owned backend closed. Never rejects. */
  readonly finished: Promise<void>
  /** Closes the owned backend and unsubscribes, once (also early, at a dispose deadline). */
  readonly release: () => Promise<void>
}

/** The error a drain left, or undefined; never rejects. */
function settled(drain: Promise<void>, sessionId: string): Promise<SessionPersistenceError | undefined> {
  return drain.then(
    () => undefined,
    (err: unknown) => asPersistenceError(err, sessionId),
  )
}

/** Whether `p` settled before the deadline (always, without one). */
async function settledBy(p: Promise<void>, deadline: { expired: Promise<void> } | undefined): Promise<boolean> {
  if (!deadline) {
    await p
    return true
  }
  return Promise.race([p.then(() => true), deadline.expired.then(() => false)])
}

function closeAllError(err: unknown): SessionPersistenceError {
  if (isSessionPersistenceError(err)) return err
  return new SessionPersistenceError('E_IO', `closing the persistence at dispose failed: ${String(err)}`, { cause: err })
}

function aggregate(what: string, failures: { id: string; error: SessionPersistenceError }[]): AggregateError {
  return new AggregateError(
    failures.map((f) => f.error),
    `${what} ${failures.length} session(s): ${failures.map((f) => `'${f.id}' (${f.error.code})`).join(', ')}`,
  )
}

export type { DeadlineOptions, HostSessionEvents }
