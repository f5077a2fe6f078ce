import { EventEmitter } from 'eventemitter3'
import { defaultLogger } from '../session/logger.js'
import type { Logger } from '../session/schema.js'
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
  flush(sessionId?: string): Promise<void>
  dispose(): Promise<void>
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
  readonly #drainer: SessionDrainer
  readonly #intake: HostIntake
  #applied = false
  #seeding: Promise<unknown> = Promise.resolve()
  #disposed = false
  #disposing: Promise<void> | undefined

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
    this.persistence = adopter.observeHostLoads(this.#backend)
    const ctx: DrainContext = {
      backend: this.#backend,
      adopter,
      flushDelayMs: parsed.flushDelayMs,
      isDisposed: () => this.#disposed,
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
    this.#seeding = this.#intake.subscribe(host)
    await this.#seeding
  }

  async flush(sessionId?: string): Promise<void> {
    if (this.#disposed) throw disposedError('flush')
    if (sessionId !== undefined) {
      const ch = this.#intake.find(sessionId)
      if (!ch) {
        throw new SessionPersistenceError('E_NOT_FOUND', `the plugin does not track session '${sessionId}'`, { sessionId })
      }
      return this.#drainer.drain(ch)
    }
    const all = this.#intake.all()
    const results = await Promise.allSettled(all.map((ch) => this.#drainer.drain(ch)))
    const failed = all.flatMap((ch, i) => {
      const r = results[i]
      return r?.status === 'rejected' ? [{ id: ch.id, error: asPersistenceError(r.reason, ch.id) }] : []
    })
    if (failed.length > 0) throw aggregate('flush failed for', failed)
  }

  dispose(): Promise<void> {
    this.#disposing ??= this.#dispose()
    return this.#disposing
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  /** Final drain of everything received, close every session (each lock), then unsubscribe. */
  async #dispose(): Promise<void> {
    this.#disposed = true
    await this.#seeding.catch(() => {})
    const all = this.#intake.all()
    for (const ch of all) ch.clearTimers()
    const failures: { id: string; error: SessionPersistenceError }[] = []
    await Promise.all(
      all.map(async (ch) => {
        let error: SessionPersistenceError | undefined
        if (ch.closing) {
          await ch.closing
          error = ch.closedWith
        } else {
          error = await this.#drainer.drain(ch).then(
            () => undefined,
            (err: unknown) => asPersistenceError(err, ch.id),
          )
          ch.clearTimers()
          await ch.queue.add(() => this.#backend.close(ch.id)).catch((err) => this.#report(asPersistenceError(err, ch.id)))
          ch.dropBuffered()
        }
        // A collision is not a durability failure: the host's events were never the log's.
        if (error && error.code !== 'E_EXISTS') failures.push({ id: ch.id, error })
      }),
    )
    // A failed close loses no event (every drain has settled): it is reported, as at
    // session/disposed, and the host is unsubscribed whatever happened.
    if (this.#ownsBackend) await (this.#backend as JsonlSessionPersistence).closeAll().catch((err: unknown) => this.#report(closeAllError(err)))
    this.#intake.channels.clear()
    this.#intake.closing.clear()
    this.#intake.unsubscribe()
    if (failures.length > 0) throw aggregate('dispose could not make durable the events of', failures)
  }

  #report(error: SessionPersistenceError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error)
    else this.#logger.warn(`${error.code}: ${error.message}`)
  }

  /** To 'recovered' listeners; else to the logger where the failure itself went (no 'error' listener either). */
  #recovered(sessionId: string, after: SessionPersistenceError): void {
    if (this.listenerCount('recovered') > 0) this.emit('recovered', sessionId, after)
    else if (this.listenerCount('error') === 0) this.#logger.warn(`session '${sessionId}': drains succeed again after ${after.code}`)
  }
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

export type { HostSessionEvents }
