import { EventEmitter } from 'eventemitter3'
import type { Logger, SessionEvent, SessionMeta } from '../core/schema.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl-persistence.js'
import type { LoadedSession, SessionPersistence } from '../persistence.js'
import { parsePluginConfig, type PluginConfig } from './config.js'
import type { AgentHost, HostSessionEvents } from './host.js'
import { SessionChannel } from './session-channel.js'

export const PLUGIN_NAME = 'session-persistence-jsonl'

export interface PluginEvents {
  /** A failed background drain, a seq gap, a collision, a dropped or late event. */
  error: [error: SessionPersistenceError]
}

export interface SessionPersistencePlugin extends EventEmitter<PluginEvents> {
  readonly name: typeof PLUGIN_NAME
  /** The backend the plugin writes to (the JSONL backend unless another was given). Hosts resume through its `load`. */
  readonly persistence: SessionPersistence
  apply(host: AgentHost): Promise<void>
  flush(sessionId?: string): Promise<void>
  dispose(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

const MAX_RETRY_MS = 5_000
const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * The plugin an agent host registers (SPEC 8): it buffers the host's session events on the
 * host's call path and drains them into the persistence, one p-queue per session.
 */
export function sessionPersistencePlugin(config: PluginConfig): SessionPersistencePlugin {
  return new Plugin(config)
}

class Plugin extends EventEmitter<PluginEvents> implements SessionPersistencePlugin {
  readonly name = PLUGIN_NAME
  readonly persistence: SessionPersistence
  readonly #backend: SessionPersistence
  readonly #ownsBackend: boolean
  readonly #flushDelayMs: number
  readonly #maxBufferedBytes: number
  readonly #logger: Logger
  readonly #channels = new Map<string, SessionChannel>()
  /** Disposed sessions still draining before their close. */
  readonly #closing = new Set<SessionChannel>()
  /** Sessions the host opened through `plugin.persistence.load`: id → stored event count. */
  readonly #hostLoads = new Map<string, number>()
  #retainedBytes = 0
  #host: AgentHost | undefined
  #seeding: Promise<unknown> = Promise.resolve()
  #disposed = false
  #disposing: Promise<void> | undefined

  constructor(config: PluginConfig) {
    super()
    const parsed = parsePluginConfig(config)
    this.#flushDelayMs = parsed.flushDelayMs
    this.#maxBufferedBytes = parsed.maxBufferedBytes
    if ('persistence' in parsed) {
      this.#backend = parsed.persistence
      this.#ownsBackend = false
      this.#logger = { warn: (m) => console.warn(`${PLUGIN_NAME}: ${m}`) }
    } else {
      const { flushDelayMs: _f, maxBufferedBytes: _m, ...jsonl } = parsed
      this.#backend = createJsonlPersistence(jsonl)
      this.#ownsBackend = true
      this.#logger = parsed.logger ?? { warn: (m) => console.warn(`${PLUGIN_NAME}: ${m}`) }
    }
    this.persistence = this.#observeHostLoads(this.#backend)
  }

  /** The host resumes through `plugin.persistence.load`; the plugin then continues from that open state. */
  #observeHostLoads(backend: SessionPersistence): SessionPersistence {
    const hostLoads = this.#hostLoads
    return new Proxy(backend, {
      get(target, prop) {
        if (prop === 'load') {
          return async (id: string, options?: { closeOpenTurn?: boolean }): Promise<LoadedSession> => {
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

  // ---- host subscription -------------------------------------------------------------

  async apply(host: AgentHost): Promise<void> {
    if (this.#disposed) throw disposedError('apply')
    if (this.#host) {
      throw new SessionPersistenceError('E_CONFIG', 'this plugin is already applied to a host; create one plugin per host')
    }
    this.#host = host
    const events = host.sessionEvents
    events.on('session/created', this.#onCreated)
    events.on('session/event', this.#onEvent)
    events.on('session/flush', this.#onFlush)
    events.on('session/disposed', this.#onDisposed)
    const seeded: Promise<unknown>[] = []
    for (const live of host.liveSessions()) {
      const ch = this.#track(live.meta, live.events)
      if (ch) seeded.push(this.#drain(ch).catch(() => {}))
    }
    this.#seeding = Promise.all(seeded)
    await this.#seeding
  }

  #onCreated = (meta: SessionMeta, seed: readonly SessionEvent[]): void => {
    if (this.#disposed) return this.#report(disposedError(`session '${meta.id}' created`, meta.id))
    const ch = this.#track(meta, seed)
    if (ch) void this.#drain(ch).catch(() => {}) // persists the seed once (after a tick: no I/O here)
  }

  /** The host's hot path: buffer the frozen event, nothing else. */
  #onEvent = (sessionId: string, event: SessionEvent): void => {
    if (this.#disposed) return this.#report(disposedError(`event ${event.seq} of session '${sessionId}'`, sessionId))
    const ch = this.#channels.get(sessionId)
    if (!ch) {
      return this.#report(
        new SessionPersistenceError('E_NOT_FOUND', `event ${event.seq} for session '${sessionId}', which the plugin does not track (no session/created)`, { sessionId }),
      )
    }
    if (ch.halted) {
      if (ch.halted.code === 'E_IO') this.#report(overflowError(ch, event))
      return
    }
    if (event.seq < ch.expected) return // below the cursor: already stored or buffered
    if (event.seq !== ch.expected) {
      ch.halted = new SessionPersistenceError(
        'E_SEQ_NOT_CONTIGUOUS',
        `session '${sessionId}': event ${event.seq} arrived where ${ch.expected} was expected; the host and the log diverged, nothing more is written for this session`,
        { sessionId },
      )
      return this.#report(ch.halted)
    }
    if (ch.sizing) {
      const bytes = Buffer.byteLength(JSON.stringify(event) ?? '') + 1
      if (this.#retainedBytes + bytes > this.#maxBufferedBytes) {
        ch.halted = new SessionPersistenceError(
          'E_IO',
          `session '${sessionId}': buffer limit of ${this.#maxBufferedBytes} bytes reached while drains fail; events from seq ${event.seq} on are dropped`,
          { sessionId, cause: ch.failure },
        )
        return this.#report(overflowError(ch, event))
      }
      ch.sizedBytes += bytes
      this.#retainedBytes += bytes
    }
    ch.buffer.push(event)
    ch.expected++
    if (event.type === 'turn/end') this.#drainSoon(ch)
    else ch.flushTimer ??= setTimeout(() => this.#drainSoon(ch), this.#flushDelayMs)
  }

  #onFlush = (sessionId: string): void => {
    const ch = this.#channels.get(sessionId)
    if (ch) this.#drainSoon(ch)
  }

  #onDisposed = (sessionId: string): void => {
    const ch = this.#channels.get(sessionId)
    if (!ch) return
    this.#channels.delete(sessionId)
    this.#closing.add(ch)
    ch.closing = this.#drainAndClose(ch)
  }

  #track(meta: SessionMeta, seed: readonly SessionEvent[]): SessionChannel | undefined {
    if (this.#channels.has(meta.id)) return undefined // a repeated session/created changes nothing
    const ch = new SessionChannel(meta, seed)
    for (const old of this.#closing) if (old.id === meta.id) ch.after = old.closing?.catch(() => {})
    this.#channels.set(meta.id, ch)
    return ch
  }

  // ---- draining ---------------------------------------------------------------------

  #drainSoon(ch: SessionChannel): void {
    void this.#drain(ch).catch(() => {})
  }

  /**
   * Queues a drain after a tick (never on the host's call stack); failures are reported and
   * retried. A drain not yet queued will take every event received so far, so a request made
   * meanwhile (a flush right after a turn/end) joins it instead of queuing an empty one.
   */
  #drain(ch: SessionChannel): Promise<void> {
    ch.scheduledDrain ??= this.#drainAfterTick(ch)
    return ch.scheduledDrain
  }

  async #drainAfterTick(ch: SessionChannel): Promise<void> {
    await nextTick()
    ch.scheduledDrain = undefined
    if (ch.flushTimer) clearTimeout(ch.flushTimer)
    ch.flushTimer = undefined
    try {
      await ch.queue.add(() => this.#drainJob(ch))
    } catch (err) {
      const error = asPersistenceError(err, ch.id)
      if (error !== ch.halted) this.#failed(ch, error)
      throw error
    }
    this.#succeeded(ch)
  }

  async #drainJob(ch: SessionChannel): Promise<void> {
    if (!ch.opened && ch.halted?.code !== 'E_EXISTS') await this.#open(ch)
    const n = ch.buffer.length
    if (n > 0 && ch.halted?.code !== 'E_EXISTS') {
      const batch = ch.buffer.slice(0, n)
      try {
        await this.#backend.append(ch.id, batch)
      } catch (err) {
        if (isSessionPersistenceError(err) && ['E_WRITER_BROKEN', 'E_NOT_FOUND', 'E_SEQ_NOT_CONTIGUOUS'].includes(err.code)) {
          // Reconcile from disk before the retry: close, then re-adopt what is really stored.
          ch.opened = false
          ch.known = ch.buffer.slice()
          ch.knownFrom = ch.cursor
          await this.#backend.close(ch.id).catch(() => {})
        }
        throw err
      }
      ch.buffer.splice(0, n)
      ch.cursor += n
    }
    if (ch.halted) throw ch.halted
  }

  /** Opens the session for appends: create it, or adopt the stored log the host's events cover. */
  async #open(ch: SessionChannel): Promise<void> {
    await ch.after
    const hostLoaded = this.#hostLoads.get(ch.id)
    if (hostLoaded !== undefined) {
      this.#hostLoads.delete(ch.id)
      return this.#opened(ch, hostLoaded)
    }
    if (ch.knownFrom === 0) {
      try {
        await this.#backend.create(ch.meta)
        return this.#opened(ch, 0)
      } catch (err) {
        if (!isSessionPersistenceError(err, 'E_EXISTS')) throw err
      }
    }
    let stored: readonly SessionEvent[]
    try {
      stored = (await this.#backend.load(ch.id, { closeOpenTurn: false })).events
    } catch (err) {
      if (!isSessionPersistenceError(err, 'E_SESSION_LIVE')) throw err
      // The host opened it through the backend itself: count what is stored (closers are not).
      const inspected = await this.#backend.inspect(ch.id)
      return this.#opened(ch, inspected.events.length - (inspected.repair?.closers.length ?? 0))
    }
    if (!ch.covers(stored)) {
      await this.#backend.close(ch.id)
      ch.buffer = []
      ch.halted = new SessionPersistenceError(
        'E_EXISTS',
        `a log for session '${ch.id}' already exists and the host's events do not continue it; nothing was written`,
        { sessionId: ch.id },
      )
      this.#report(ch.halted)
      throw ch.halted
    }
    this.#opened(ch, stored.length)
  }

  #opened(ch: SessionChannel, storedCount: number): void {
    ch.opened = true
    const before = ch.buffer.length
    ch.storedUpTo(storedCount)
    if (ch.sizing && ch.buffer.length !== before) this.#resize(ch)
  }

  #succeeded(ch: SessionChannel): void {
    ch.failure = undefined
    ch.retryDelayMs = 0
    if (ch.sizing) this.#resize(ch)
  }

  #failed(ch: SessionChannel, error: SessionPersistenceError): void {
    ch.failure = error
    this.#report(error)
    if (!ch.sizing) {
      ch.sizing = true
      this.#resize(ch)
    }
    if (this.#disposed || ch.retryTimer) return
    ch.retryDelayMs = Math.min(MAX_RETRY_MS, Math.max(50, ch.retryDelayMs * 2 || this.#flushDelayMs))
    ch.retryTimer = setTimeout(() => {
      ch.retryTimer = undefined
      if (ch.closing) return // the close loop retries by itself
      if (!this.#disposed) this.#drainSoon(ch)
    }, ch.retryDelayMs)
  }

  /** Recounts a failing session's buffered bytes; sizing stops once its buffer is empty. */
  #resize(ch: SessionChannel): void {
    this.#retainedBytes -= ch.sizedBytes
    ch.sizedBytes = 0
    for (const e of ch.buffer) ch.sizedBytes += Buffer.byteLength(JSON.stringify(e) ?? '') + 1
    this.#retainedBytes += ch.sizedBytes
    if (ch.buffer.length === 0 && !ch.failure) ch.sizing = false
  }

  /** session/disposed: drain, then close (releasing the lock); retried while drains fail. */
  async #drainAndClose(ch: SessionChannel): Promise<void> {
    for (;;) {
      const finalAttempt = this.#disposed // once dispose began, one more attempt and no more
      try {
        await this.#drain(ch)
        break
      } catch {
        if (ch.halted || finalAttempt) break // nothing more can be written: close anyway
      }
      await ch.sleep(ch.retryDelayMs || this.#flushDelayMs)
    }
    ch.clearTimers()
    await ch.queue.add(() => this.#backend.close(ch.id))
    this.#retainedBytes -= ch.sizedBytes
    this.#closing.delete(ch)
  }

  // ---- barriers and lifecycle -------------------------------------------------------

  async flush(sessionId?: string): Promise<void> {
    if (this.#disposed) throw disposedError('flush')
    if (sessionId !== undefined) {
      const ch = this.#channels.get(sessionId) ?? [...this.#closing].find((c) => c.id === sessionId)
      if (!ch) {
        throw new SessionPersistenceError('E_NOT_FOUND', `the plugin does not track session '${sessionId}'`, { sessionId })
      }
      return this.#drain(ch)
    }
    const all = [...this.#channels.values(), ...this.#closing]
    const results = await Promise.allSettled(all.map((ch) => this.#drain(ch)))
    const failed = all.flatMap((ch, i) => {
      const r = results[i]
      return r?.status === 'rejected' ? [{ id: ch.id, error: r.reason as SessionPersistenceError }] : []
    })
    if (failed.length > 0) {
      throw new AggregateError(
        failed.map((f) => f.error),
        `flush failed for ${failed.length} session(s): ${failed.map((f) => `'${f.id}' (${f.error.code})`).join(', ')}`,
      )
    }
  }

  dispose(): Promise<void> {
    this.#disposing ??= this.#dispose()
    return this.#disposing
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose()
  }

  async #dispose(): Promise<void> {
    this.#disposed = true
    await this.#seeding.catch(() => {})
    const all = [...this.#channels.values(), ...this.#closing]
    for (const ch of all) ch.clearTimers()
    const failures: { id: string; error: SessionPersistenceError }[] = []
    await Promise.all(
      all.map(async (ch) => {
        try {
          await (ch.closing ?? this.#drain(ch))
          if (ch.closing && ch.halted === undefined && ch.buffer.length > 0) throw ch.failure ?? ch.halted
        } catch (err) {
          const error = asPersistenceError(err, ch.id)
          if (error.code !== 'E_EXISTS') failures.push({ id: ch.id, error })
        }
        ch.clearTimers()
        await ch.queue.add(() => this.#backend.close(ch.id)).catch((err) => this.#report(asPersistenceError(err, ch.id)))
      }),
    )
    if (this.#ownsBackend) await (this.#backend as { closeAll?: () => Promise<void> }).closeAll?.()
    this.#channels.clear()
    this.#closing.clear()
    const host = this.#host
    if (host) {
      host.sessionEvents.off('session/created', this.#onCreated)
      host.sessionEvents.off('session/event', this.#onEvent)
      host.sessionEvents.off('session/flush', this.#onFlush)
      host.sessionEvents.off('session/disposed', this.#onDisposed)
    }
    if (failures.length > 0) {
      throw new AggregateError(
        failures.map((f) => f.error),
        `dispose could not make the events of ${failures.length} session(s) durable: ${failures.map((f) => `'${f.id}' (${f.error.code})`).join(', ')}`,
      )
    }
  }

  #report(error: SessionPersistenceError): void {
    if (this.listenerCount('error') > 0) this.emit('error', error)
    else this.#logger.warn(`${error.code}: ${error.message}`)
  }
}

function asPersistenceError(err: unknown, sessionId: string): SessionPersistenceError {
  if (isSessionPersistenceError(err)) return err
  return new SessionPersistenceError('E_IO', `session '${sessionId}': ${String(err)}`, { sessionId, cause: err })
}

function disposedError(what: string, sessionId?: string): SessionPersistenceError {
  return new SessionPersistenceError('E_DISPOSED', `${what} after the plugin was disposed; not written`, { sessionId })
}

function overflowError(ch: SessionChannel, event: SessionEvent): SessionPersistenceError {
  return new SessionPersistenceError(
    'E_IO',
    `session '${ch.id}': event ${event.seq} (${event.type}) dropped: the buffer limit was reached while drains fail`,
    { sessionId: ch.id, cause: ch.halted },
  )
}

export type { HostSessionEvents }
