import { assertSeedLength, childMeta } from '../session/fork-point.js'
import { EventEmitter } from 'eventemitter3'
import { hostname } from 'node:os'
import PQueue from 'p-queue'
import { callOptions } from '../session/call-options.js'
import { computeClosers } from '../session/closers.js'
import { encodeSessionId } from '../session/id-encoding.js'
import { headerLine, validateMeta } from '../session/meta.js'
import { bucketName, logFileName } from '../jsonl/paths.js'
import { prepareBatch } from '../session/prepare-batch.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { SessionFormatUnsupportedError, SessionPersistenceError } from '../errors.js'
import { assertNotWrittenSince, parseDeleteOptions } from '../session/delete-options.js'
import type {
  DeleteOptions,
  ForkChild,
  ListOptions,
  LoadedSession,
  LoadOptions,
  RawSessionLog,
  SessionListing,
  SessionLocation,
  RawPageOptions,
  RawSessionStream,
  ReadRange,
  SessionRange,
  SessionStore,
  WatchOptions,
} from '../persistence.js'
import { listingOrder, parseListOrder, parseLoadFrom, parseReadRange, parseWatchOptions, rangeBounds } from '../session/read-options.js'
import { tailStartOf } from '../session/tail-start.js'
import { watchLoop } from '../session/watch-loop.js'

interface StoredSession {
  meta: SessionMeta
  /** The header line and the event lines, exactly as the JSONL backend would write them (no `\n`). */
  headerLine: string
  lines: string[]
  bytes: number
  mtimeMs: number
}

/** What several in-memory instances share: the "disk" and the writer locks. */
export class MemoryStore {
  readonly sessions = new Map<string, StoredSession>()
  readonly locks = new Map<string, object>()
  readonly lockedSince = new Map<string, number>() // epoch ms each lock was taken (E_LOCKED's holder)
  /** Told the id of every session whose stored lines changed (appended, published, deleted). */
  readonly changes = new EventEmitter<{ change: [id: string] }>()
}

const namedStores = new Map<string, MemoryStore>()

export interface MemoryPersistenceOptions {
  /** Share a store explicitly… */
  store?: MemoryStore
  /** …or by name: instances created with the same name share one store (process-wide). */
  name?: string
}

/**
 * The in-memory reference backend of the `SessionPersistence` seam. It keeps the seam's
 * observable rules (validation, seqs, one writer per session, closers, delete, fork, raw
 * transfer) without a file system, and passes the same conformance suite as the JSONL backend.
 * Two instances over one store contend for sessions as two processes over one root would.
 * Nothing survives the process.
 */
export function createMemoryPersistence(options: MemoryPersistenceOptions = {}): SessionStore {
  let store = options.store
  if (!store && options.name !== undefined) {
    store = namedStores.get(options.name) ?? new MemoryStore()
    namedStores.set(options.name, store)
  }
  return new MemoryPersistence(store ?? new MemoryStore(), options.name ?? 'memory')
}

interface Open {
  meta: SessionMeta
  nextSeq: number
  /** The log this instance writes: loaded, forked with a seed, or published by its first append. */
  stored: StoredSession | undefined
  queue: PQueue
  closing: Promise<void> | undefined
}

const withoutNewline = (line: string) => line.slice(0, -1)

class MemoryPersistence implements SessionStore {
  readonly #store: MemoryStore
  readonly #name: string
  readonly #open = new Map<string, Open>()
  readonly #token = {}

  constructor(store: MemoryStore, name: string) {
    this.#store = store
    this.#name = name
  }

  locate(meta: SessionMeta): SessionLocation {
    const valid = validateMeta(meta)
    return { kind: 'jsonl', path: `memory:${this.#name}/${bucketName(valid.cwd)}/${logFileName(valid.id)}` }
  }

  async create(meta: SessionMeta): Promise<void> {
    const valid = validateMeta(meta)
    if (this.#open.has(valid.id) || this.#store.sessions.has(valid.id)) {
      throw new SessionPersistenceError('E_EXISTS', `session '${valid.id}' already exists`, { sessionId: valid.id })
    }
    this.#track(valid, 0, undefined)
  }

  #track(meta: SessionMeta, nextSeq: number, stored: StoredSession | undefined): void {
    this.#open.set(meta.id, { meta, nextSeq, stored, queue: new PQueue({ concurrency: 1 }), closing: undefined })
  }

  async append(id: string, events: readonly SessionEvent[]): Promise<void> {
    const s = this.#open.get(id)
    if (!s || s.closing) {
      throw new SessionPersistenceError('E_NOT_FOUND', `session '${id}' is not open for appends`, { sessionId: id })
    }
    const batch = prepareBatch(id, events)
    if (batch.count === 0) return
    const lines = batch.bytes.toString('utf8').split('\n').slice(0, -1)
    await s.queue.add(async () => {
      if (batch.firstSeq !== s.nextSeq) {
        throw new SessionPersistenceError(
          'E_SEQ_NOT_CONTIGUOUS',
          `session '${id}': the batch starts at seq ${batch.firstSeq}, the log continues at ${s.nextSeq}`,
          { sessionId: id },
        )
      }
      this.#lock(id)
      let stored = this.#store.sessions.get(id)
      if (s.stored === undefined) {
        // Materialization re-checks under the lock, as the JSONL backend does: another instance
        // may have published this id since `create`, and its log must not get these lines.
        if (stored) throw new SessionPersistenceError('E_EXISTS', `a log for session '${id}' already exists`, { sessionId: id })
        stored = this.#publish(s.meta, [])
        s.stored = stored
      } else if (stored !== s.stored) {
        throw new SessionPersistenceError('E_NOT_FOUND', `session '${id}' was deleted`, { sessionId: id })
      }
      stored.lines.push(...lines)
      stored.bytes += batch.bytes.length
      stored.mtimeMs = Date.now()
      s.nextSeq += batch.count
      this.#store.changes.emit('change', id)
    })
  }

  #publish(meta: SessionMeta, lines: string[]): StoredSession {
    const header = headerLine(meta)
    const stored: StoredSession = {
      meta,
      headerLine: withoutNewline(header),
      lines,
      bytes: Buffer.byteLength(header) + lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0),
      mtimeMs: Date.now(),
    }
    this.#store.sessions.set(meta.id, stored)
    this.#store.changes.emit('change', meta.id)
    return stored
  }

  #lock(id: string): void {
    const holder = this.#store.locks.get(id)
    if (holder !== undefined && holder !== this.#token) {
      throw new SessionPersistenceError('E_LOCKED', `session '${id}' is being written by another instance`, {
        sessionId: id,
        holder: { pid: process.pid, host: hostname(), since: this.#store.lockedSince.get(id) ?? Date.now() },
      })
    }
    if (holder === undefined) this.#store.lockedSince.set(id, Date.now())
    this.#store.locks.set(id, this.#token)
  }

  #read(id: string): { stored: StoredSession; events: SessionEvent[] } {
    encodeSessionId(id)
    const stored = this.#store.sessions.get(id)
    if (!stored) throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}'`, { sessionId: id })
    return { stored, events: stored.lines.map((line) => JSON.parse(line) as SessionEvent) }
  }

  async load(id: string, options?: LoadOptions): Promise<LoadedSession> {
    const opts = callOptions(options, 'load')
    const closeOpenTurn = opts.closeOpenTurn !== false
    const from = parseLoadFrom(opts)
    if (this.#open.has(id)) {
      throw new SessionPersistenceError('E_SESSION_LIVE', `session '${id}' is open in this instance`, { sessionId: id })
    }
    const { stored, events } = this.#read(id) // found first: a missing log takes no lock
    this.#lock(id)
    const closers = closeOpenTurn ? computeClosers(events, stored.meta.createdAt) : []
    const all = [...events, ...closers]
    for (const c of closers) {
      const line = JSON.stringify(c)
      stored.lines.push(line)
      stored.bytes += Buffer.byteLength(line) + 1
      stored.mtimeMs = Date.now()
    }
    if (closers.length > 0) this.#store.changes.emit('change', id)
    this.#track(stored.meta, all.length, stored)
    const firstSeq = from === 'last-compaction' ? tailStartOf(all) : 0
    const loaded: LoadedSession = { meta: structuredClone(stored.meta), events: firstSeq > 0 ? all.slice(firstSeq) : all, firstSeq }
    if (closers.length > 0) {
      loaded.repair = { persisted: true, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
    }
    return loaded
  }

  async inspect(id: string): Promise<LoadedSession> {
    const { stored, events } = this.#read(id)
    const closers = computeClosers(events, stored.meta.createdAt)
    const loaded: LoadedSession = { meta: structuredClone(stored.meta), events: [...events, ...closers], firstSeq: 0 }
    if (closers.length > 0) {
      loaded.repair = { persisted: false, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
    }
    return loaded
  }

  async list(options?: ListOptions): Promise<SessionListing[]> {
    const { orderBy, limit } = parseListOrder(callOptions(options, 'list'))
    const all = [...this.#store.sessions.values()]
      .map((s) => ({
        meta: structuredClone(s.meta),
        location: this.locate(s.meta),
        sizeBytes: s.bytes,
        mtimeMs: s.mtimeMs,
      }))
      .sort(listingOrder(orderBy))
    return limit === undefined ? all : all.slice(0, limit)
  }

  async read(id: string, range?: ReadRange): Promise<SessionRange> {
    const parsed = parseReadRange(range)
    encodeSessionId(id)
    const stored = this.#store.sessions.get(id)
    if (!stored) throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}'`, { sessionId: id })
    const { from, to } = rangeBounds(parsed, stored.lines.length)
    const events = stored.lines.slice(from, to).map((line) => JSON.parse(line) as SessionEvent)
    return { meta: structuredClone(stored.meta), events, firstSeq: from, length: stored.lines.length }
  }

  watch(id: string, options?: WatchOptions): AsyncIterable<SessionEvent> {
    const { fromSeq, signal } = parseWatchOptions(options)
    encodeSessionId(id)
    const { changes } = this.#store
    let wake: (() => void) | undefined
    const listener = (changed: string) => {
      if (changed === id) wake?.()
    }
    changes.on('change', listener)
    return watchLoop(
      {
        poll: async (next) => {
          const stored = this.#store.sessions.get(id)
          if (!stored) return { kind: 'missing' }
          return { kind: 'events', events: stored.lines.slice(next).map((line) => JSON.parse(line) as SessionEvent) }
        },
        changed: (stop) =>
          new Promise<void>((resolve) => {
            if (stop.aborted) return resolve()
            wake = resolve
            stop.addEventListener('abort', () => resolve(), { once: true })
          }),
        close: () => void changes.off('change', listener),
      },
      fromSeq,
      signal,
    )
  }

  async delete(id: string, options?: DeleteOptions): Promise<void> {
    encodeSessionId(id)
    const condition = parseDeleteOptions(options, id)
    if (this.#open.has(id)) {
      throw new SessionPersistenceError('E_SESSION_LIVE', `session '${id}' is open in this instance; close it first`, { sessionId: id })
    }
    const stored = this.#store.sessions.get(id)
    if (!stored) throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}'`, { sessionId: id })
    this.#lock(id)
    try {
      assertNotWrittenSince(condition, stored.mtimeMs, { sessionId: id })
    } catch (err) {
      this.#store.locks.delete(id) // refused: the lock goes, the session stays as it was
      throw err
    }
    this.#store.sessions.delete(id)
    this.#store.locks.delete(id)
    this.#store.changes.emit('change', id)
  }

  async fork(parentId: string, child: ForkChild): Promise<SessionMeta> {
    assertSeedLength(child)
    const { seedLength } = child
    encodeSessionId(child.id)
    const { stored: parent, events } = this.#read(parentId)
    if (seedLength > events.length || (seedLength > 0 && events[seedLength - 1]?.type !== 'turn/end')) {
      throw new SessionPersistenceError('E_BAD_FORK_POINT', `cannot fork '${parentId}' at ${seedLength}`, { sessionId: parentId })
    }
    const meta = childMeta(parentId, parent.meta, child)
    if (this.#open.has(meta.id) || this.#store.sessions.has(meta.id)) {
      throw new SessionPersistenceError('E_EXISTS', `session '${meta.id}' already exists`, { sessionId: meta.id })
    }
    let stored: StoredSession | undefined
    if (seedLength > 0) {
      this.#lock(meta.id)
      stored = this.#publish(meta, parent.lines.slice(0, seedLength))
    }
    this.#track(meta, seedLength, stored)
    return structuredClone(meta)
  }

  async readRaw(id: string): Promise<RawSessionLog> {
    const { stored } = this.#read(id)
    return { id, headerLine: stored.headerLine, eventLines: [...stored.lines] }
  }

  async importRaw(log: RawSessionLog): Promise<void> {
    encodeSessionId(log.id)
    let header: unknown
    try {
      header = JSON.parse(log.headerLine)
    } catch (err) {
      throw new SessionPersistenceError('E_CORRUPT', `the header line of '${log.id}' is not JSON`, { sessionId: log.id, cause: err })
    }
    const { type, version, ...rest } = (header ?? {}) as Record<string, unknown>
    if (type === 'session' && typeof version === 'number' && version !== 0) {
      throw new SessionFormatUnsupportedError(version, `the header line of '${log.id}' is format version ${version}; this release reads version 0`, { sessionId: log.id })
    }
    if (type !== 'session' || version !== 0) {
      throw new SessionPersistenceError('E_CORRUPT', `the header line of '${log.id}' is not a version 0 session header`, { sessionId: log.id })
    }
    const meta = validateMeta(rest)
    if (meta.id !== log.id) {
      throw new SessionPersistenceError('E_INVALID_META', `the header names '${meta.id}', not '${log.id}'`, { sessionId: log.id })
    }
    const events = log.eventLines.map((line, i) => {
      try {
        return JSON.parse(line) as SessionEvent
      } catch (err) {
        throw new SessionPersistenceError('E_CORRUPT', `event line ${i} of '${log.id}' is not JSON`, { sessionId: log.id, cause: err })
      }
    })
    prepareBatch(log.id, events) // the same envelope and JSON checks as append
    if (events.some((e, i) => e.seq !== i)) {
      throw new SessionPersistenceError('E_SEQ_NOT_CONTIGUOUS', `the events of '${log.id}' do not run from seq 0`, { sessionId: log.id })
    }
    if (this.#open.has(log.id) || this.#store.sessions.has(log.id)) {
      throw new SessionPersistenceError('E_EXISTS', `session '${log.id}' already exists`, { sessionId: log.id })
    }
    this.#lock(log.id)
    const stored = this.#publish(meta, [...log.eventLines])
    stored.headerLine = log.headerLine
    stored.bytes = Buffer.byteLength(log.headerLine) + 1 + log.eventLines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
    this.#store.locks.delete(log.id)
  }

  async openRawStream(id: string, options: RawPageOptions = {}): Promise<RawSessionStream> {
    const { stored } = this.#read(id)
    const lines = [...stored.lines]
    const pageLines = options.pageLines ?? 1000
    async function* eventPages(): AsyncGenerator<readonly string[]> {
      for (let i = 0; i < lines.length; i += pageLines) yield lines.slice(i, i + pageLines)
    }
    return { id, headerLine: stored.headerLine, eventPages: eventPages() }
  }

  async importRawStream(log: RawSessionStream): Promise<{ eventLines: number }> {
    // Nothing here is bounded by a page: the in-memory store holds every session whole anyway.
    const eventLines: string[] = []
    for await (const page of log.eventPages) eventLines.push(...page)
    await this.importRaw({ id: log.id, headerLine: log.headerLine, eventLines })
    return { eventLines: eventLines.length }
  }

  close(id: string): Promise<void> {
    const s = this.#open.get(id)
    if (!s) return Promise.resolve()
    s.closing ??= s.queue.onIdle().then(() => {
      this.#open.delete(id)
      if (this.#store.locks.get(id) === this.#token) this.#store.locks.delete(id)
    })
    return s.closing
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#open.keys()].map((id) => this.close(id)))
  }
}
