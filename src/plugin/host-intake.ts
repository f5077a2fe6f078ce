import { readField } from '../session/as-object.js'
import { valueName } from '../session/value-name.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { BufferBudget } from './buffer-budget.js'
import type { AgentHost, HostSessionEvents, LiveSession, SeedOptions, SessionEventSource } from './host.js'
import { disposedError, divergedError, EventDroppedError } from './plugin-errors.js'
import type { DrainContext, SessionDrainer } from './session-drain.js'
import { SessionChannel } from './session-channel.js'

/**
 * The plugin's subscription to a host: the four host events, turned into per-session channels.
 * The handlers run on the host's call path, so they only validate, buffer and schedule; every
 * byte is written later, by the drain.
 */
export class HostIntake {
  /** Sessions tracked since their session/created (or seeding), until their session/disposed. */
  readonly channels = new Map<string, SessionChannel>()
  /** Disposed sessions still draining before their close. */
  readonly closing = new Set<SessionChannel>()
  readonly #ctx: DrainContext
  readonly #drainer: SessionDrainer
  readonly #budget: BufferBudget
  #source: SessionEventSource<HostSessionEvents> | undefined

  constructor(ctx: DrainContext, drainer: SessionDrainer, budget: BufferBudget) {
    this.#ctx = ctx
    this.#drainer = drainer
    this.#budget = budget
  }

  /** Subscribes, then seeds every live session; resolves when the seeds are written (or failed). */
  subscribe(host: AgentHost): Promise<unknown> {
    // Read before subscribing: a host whose liveSessions() fails leaves the plugin unapplied
    // (E_CONFIG, thrown here), subscribed to nothing and free to apply again.
    const live = liveSnapshot(host)
    this.#source = host.sessionEvents
    this.#source.on('session/created', this.#onCreated)
    this.#source.on('session/event', this.#onEvent)
    this.#source.on('session/flush', this.#onFlush)
    this.#source.on('session/disposed', this.#onDisposed)
    const seeded: Promise<unknown>[] = []
    for (const [i, entry] of live.entries()) {
      let read: [SessionMeta, readonly SessionEvent[], SeedOptions | undefined]
      try {
        const { meta, events, firstSeq } = entry as LiveSession
        read = [meta, events, firstSeq === undefined ? undefined : { firstSeq }]
      } catch (err) {
        // Not an object, or a throwing getter: that entry is refused as a bad meta, the others are seeded.
        this.#ctx.report(new SessionPersistenceError('E_INVALID_META', `entry ${i} of the host's liveSessions() cannot be read as { meta, events } (${String(err)}); that session is not tracked`, { cause: err }))
        continue
      }
      const ch = this.#track(...read)
      if (ch) seeded.push(this.#drainer.drain(ch).catch(() => {}))
    }
    return Promise.all(seeded)
  }

  unsubscribe(): void {
    const source = this.#source
    this.#source = undefined
    source?.off('session/created', this.#onCreated)
    source?.off('session/event', this.#onEvent)
    source?.off('session/flush', this.#onFlush)
    source?.off('session/disposed', this.#onDisposed)
  }

  /** A tracked session, or one still closing after its session/disposed. */
  find(sessionId: string): SessionChannel | undefined {
    return this.channels.get(sessionId) ?? [...this.closing].find((c) => c.id === sessionId)
  }

  all(): SessionChannel[] {
    return [...this.channels.values(), ...this.closing]
  }

  #onCreated = (meta: SessionMeta, seed: readonly SessionEvent[], options?: SeedOptions): void => {
    if (this.#ctx.isDisposed()) {
      const id = peekId(meta)
      return this.#ctx.report(disposedError(`session '${String(id)}' created`, typeof id === 'string' ? id : undefined))
    }
    const ch = this.#track(meta, seed, options)
    if (ch) this.#drainer.drainSoon(ch) // persists the seed once (after a tick: no I/O here)
  }

  /** The host's hot path: buffer the frozen event, nothing else. */
  #onEvent = (sessionId: string, event: SessionEvent): void => {
    // Never throws into the host's emit: the seq and type are read once, guarded (a throwing
    // getter, a revoked Proxy), and the id is named with String() (a Symbol breaks a template).
    // The error paths name the event with seqName; the hot path reads the two fields inline.
    if (this.#ctx.isDisposed()) return this.#ctx.report(disposedError(`event ${seqName(event)} of session '${String(sessionId)}'`, typeof sessionId === 'string' ? sessionId : undefined))
    const ch = this.channels.get(sessionId)
    if (!ch) {
      return this.#ctx.report(
        new SessionPersistenceError('E_NOT_FOUND', `event ${seqName(event)} for session '${String(sessionId)}', which the plugin does not track (no session/created)`, {
          sessionId: typeof sessionId === 'string' ? sessionId : undefined,
        }),
      )
    }
    if (ch.halted) {
      // Each dropped event is reported; after any other halt the session's events are ignored.
      if (ch.halted instanceof EventDroppedError) this.#ctx.report(this.#dropped(ch, event))
      return
    }
    if (typeof event !== 'object' || event === null) {
      const error = new SessionPersistenceError('E_INVALID_EVENT', `session '${sessionId}': the host sent ${String(event)} as an event; its seq is unknown, so nothing more is written for this session`, { sessionId })
      return this.#drainer.halt(ch, error, { dropBuffered: false })
    }
    let seq: unknown
    let type: unknown
    try {
      seq = event.seq
      type = event.type
    } catch (err) {
      const error = new SessionPersistenceError('E_INVALID_EVENT', `session '${sessionId}': the host sent an event whose seq or type cannot be read (${String(err)}); nothing more is written for this session`, { sessionId, cause: err })
      return this.#drainer.halt(ch, error, { dropBuffered: false })
    }
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
      // §2: a seq is a non-negative safe integer. One that is not (-1, 1.5, '2') was never
      // stored: it is not the event below the cursor it may look like.
      const error = new SessionPersistenceError('E_INVALID_EVENT', `session '${sessionId}': the host sent an event whose seq is ${typeof seq === 'string' ? JSON.stringify(seq) : String(seq)}, not a non-negative integer; nothing more is written for this session`, { sessionId })
      return this.#drainer.halt(ch, error, { dropBuffered: false })
    }
    if (seq < ch.expected) return // below the cursor: already stored or buffered
    if (seq !== ch.expected) {
      return this.#drainer.halt(ch, divergedError(sessionId, `event ${seqName(event)} arrived where ${ch.expected} was expected`), { dropBuffered: false })
    }
    if (ch.share.sizing && !ch.share.tryAdd(event)) {
      return this.#drainer.halt(ch, this.#dropped(ch, event), { dropBuffered: false })
    }
    ch.buffer.push(event)
    ch.expected++
    if (type === 'turn/end') this.#drainer.drainSoon(ch)
    else this.#drainer.drainLater(ch)
  }

  #onFlush = (sessionId: string): void => {
    const ch = this.channels.get(sessionId)
    if (ch) this.#drainer.drainSoon(ch)
  }

  #onDisposed = (sessionId: string): void => {
    const ch = this.channels.get(sessionId)
    if (!ch) return
    this.channels.delete(sessionId)
    this.closing.add(ch)
    ch.closing = this.#drainer.drainAndClose(ch).then(() => {
      this.closing.delete(ch)
    })
  }

  /** Starts tracking a session; `undefined` when it is tracked already or its meta is refused. */
  #track(meta: SessionMeta, seed: readonly SessionEvent[], options?: SeedOptions): SessionChannel | undefined {
    let id: unknown
    let events: readonly SessionEvent[]
    let firstSeq: number
    try {
      id = readId(meta)
      if (this.channels.has(id as string)) return undefined // a repeated session/created changes nothing
      this.#ctx.backend.locate(meta) // validates id and meta without I/O
      events = readSeed(meta.id, seed) // read once: what is checked is what is buffered
      firstSeq = seedStart(meta.id, events, options)
    } catch (err) {
      const sessionId = typeof id === 'string' ? id : undefined
      this.#ctx.report(
        isSessionPersistenceError(err) ? err : new SessionPersistenceError('E_INVALID_META', `session/created with meta the backend cannot use: ${String(err)}`, { sessionId, cause: err }),
      )
      return undefined
    }
    // A seed event that is not an object is refused as a later one is (#onEvent): the events
    // before it are written, it and everything after are not, and the refusal is reported once.
    const bad = events.findIndex((event) => typeof event !== 'object' || event === null)
    const ch = new SessionChannel(meta, bad < 0 ? events : events.slice(0, bad), this.#budget, firstSeq)
    for (const old of this.closing) if (old.id === ch.id) ch.after = old.closing
    this.channels.set(ch.id, ch)
    if (bad >= 0) {
      const error = new SessionPersistenceError(
        'E_INVALID_EVENT',
        `session '${ch.id}': event ${bad} of the host's seed is ${String(events[bad])}, not an event; the ${bad} before it are written, nothing more is written for this session`,
        { sessionId: ch.id },
      )
      this.#drainer.halt(ch, error, { dropBuffered: false })
    }
    return ch
  }

  /** The report of a dropped event, named by its seq and type as far as they can be read. */
  #dropped(ch: SessionChannel, event: unknown): EventDroppedError {
    const named = { seq: readField(event, 'seq'), type: readField(event, 'type') } as SessionEvent
    return new EventDroppedError(ch.id, named, this.#budget.maxBytes, ch.failure ?? ch.stall ?? ch.lastFailure)
  }
}

/** An event's seq for a message: a number or string as it is, else its kind (`undefined` when it cannot be read). */
function seqName(event: unknown): string {
  const seq = readField(event, 'seq')
  return typeof seq === 'number' ? String(seq) : typeof seq === 'string' ? JSON.stringify(seq) : typeof seq
}

/** The host's live sessions, read once; a liveSessions() that throws, or is not iterable, is `E_CONFIG`. */
function liveSnapshot(host: AgentHost): unknown[] {
  try {
    const live = host.liveSessions() as unknown
    // Array.from takes 5 or {} for an empty list, and { length: 2 } for two holes: only an iterable is a list.
    if (typeof (live as { [Symbol.iterator]?: unknown } | null | undefined)?.[Symbol.iterator] !== 'function') throw new TypeError(`it returned ${valueName(live)}, not an iterable`)
    return Array.from(live as Iterable<unknown>)
  } catch (err) {
    throw new SessionPersistenceError('E_CONFIG', `the host's liveSessions() failed (${String(err)}); the plugin is not applied`, { cause: err })
  }
}

function seedRefused(sessionId: string, why: string, cause?: unknown): SessionPersistenceError {
  return new SessionPersistenceError('E_INVALID_META', `session/created of '${sessionId}': ${why}; the session is not tracked`, { sessionId, cause })
}

/** `meta.id`; a meta that cannot be read (a revoked Proxy, a throwing getter) is `E_INVALID_META`. */
function readId(meta: unknown): unknown {
  try {
    return (meta as Partial<SessionMeta> | null | undefined)?.id
  } catch (err) {
    throw new SessionPersistenceError('E_INVALID_META', `session/created with meta that cannot be read: ${String(err)}; the session is not tracked`, { cause: err })
  }
}

/** `meta.id` for a message, or undefined when it cannot be read. */
function peekId(meta: unknown): unknown {
  try {
    return readId(meta)
  } catch {
    return undefined
  }
}

/**
 * The seed's events, copied once. A seed that is not an array, or that cannot be read (its
 * `length` or an element throws: a Proxy), is refused like a bad meta (`E_INVALID_META`, not tracked).
 */
function readSeed(sessionId: string, seed: unknown): readonly SessionEvent[] {
  let isArray: boolean
  try {
    isArray = Array.isArray(seed)
  } catch (err) {
    throw seedRefused(sessionId, `the seed cannot be read (${String(err)})`, err) // a revoked Proxy
  }
  if (!isArray) throw seedRefused(sessionId, `the seed must be an array of events (empty for a new session), got ${seed === null ? 'null' : typeof seed}`)
  try {
    return Array.prototype.slice.call(seed) as SessionEvent[]
  } catch (err) {
    throw seedRefused(sessionId, `the seed cannot be read (${String(err)})`, err)
  }
}

/**
 * The seq the seed starts at: 0, or the `firstSeq` of `session/created`'s third argument, a
 * non-negative safe integer that the seed's own seqs agree with. Anything else is refused like
 * a bad meta (`E_INVALID_META`, not tracked).
 */
function seedStart(sessionId: string, seed: readonly SessionEvent[], options: SeedOptions | undefined): number {
  const bad = (why: string, cause?: unknown) => seedRefused(sessionId, why, cause)
  if (typeof options !== 'object' && options !== undefined) throw bad(`the seed options must be an object like { firstSeq }, got ${String(options)}`)
  if (options === null) throw bad('the seed options must be an object like { firstSeq }, got null')
  const firstSeq = options?.firstSeq ?? 0
  if (typeof firstSeq !== 'number' || !Number.isSafeInteger(firstSeq) || firstSeq < 0) {
    throw bad(`firstSeq must be a non-negative integer, got ${typeof firstSeq === 'number' ? firstSeq : typeof firstSeq}`)
  }
  // Every seed, with or without firstSeq: a seed that does not run firstSeq, firstSeq + 1, … is
  // the host's mistake, refused here once, never retried against the log (its appends would be).
  // An entry that is not an object is left to #track (the events before it are written).
  for (let i = 0; i < seed.length; i++) {
    const event = seed[i]
    if (typeof event !== 'object' || event === null) break
    let seq: unknown
    try {
      seq = (event as { seq?: unknown }).seq
    } catch (err) {
      throw bad(`its event ${i} cannot be read (${String(err)})`, err)
    }
    if (seq !== firstSeq + i) {
      const given = typeof seq === 'number' ? String(seq) : typeof seq === 'string' ? JSON.stringify(seq) : typeof seq
      throw bad(`the seed starts at ${options?.firstSeq === undefined ? 'seq 0 (no firstSeq given)' : `firstSeq ${firstSeq}`}, so its event ${i} must have seq ${firstSeq + i}, not ${given}`)
    }
  }
  return firstSeq
}
