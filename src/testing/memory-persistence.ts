import PQueue from 'p-queue'
import { computeClosers } from '../core/closers.js'
import { encodeSessionId } from '../core/id-encoding.js'
import { validateMeta } from '../core/meta.js'
import { bucketName, logFileName } from '../core/paths.js'
import { prepareBatch } from '../core/prepare-batch.js'
import type { SessionEvent, SessionMeta } from '../core/schema.js'
import { SessionPersistenceError } from '../errors.js'
import type { ListOptions, LoadedSession, LoadOptions, SessionListing, SessionLocation, SessionPersistence } from '../persistence.js'

interface StoredSession {
  meta: SessionMeta
  /** Serialized event lines, exactly as the JSONL backend would write them. */
  lines: string[]
  bytes: number
  mtimeMs: number
}

/** What several in-memory instances share: the "disk" and the writer locks. */
export class MemoryStore {
  readonly sessions = new Map<string, StoredSession>()
  readonly locks = new Map<string, object>()
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
 * observable rules (validation, seqs, one writer per session, closers) without a file system,
 * and passes the same conformance suite as the JSONL backend. Nothing survives the process.
 */
export function createMemoryPersistence(options: MemoryPersistenceOptions = {}): SessionPersistence {
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
  queue: PQueue
  closing: Promise<void> | undefined
}

class MemoryPersistence implements SessionPersistence {
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
    this.#open.set(valid.id, { meta: valid, nextSeq: 0, queue: new PQueue({ concurrency: 1 }), closing: undefined })
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
      if (!stored) {
        stored = { meta: s.meta, lines: [], bytes: 0, mtimeMs: Date.now() }
        this.#store.sessions.set(id, stored)
      }
      stored.lines.push(...lines)
      stored.bytes += batch.bytes.length
      stored.mtimeMs = Date.now()
      s.nextSeq += batch.count
    })
  }

  #lock(id: string): void {
    const holder = this.#store.locks.get(id)
    if (holder !== undefined && holder !== this.#token) {
      throw new SessionPersistenceError('E_LOCKED', `session '${id}' is being written by another instance`, {
        sessionId: id,
      })
    }
    this.#store.locks.set(id, this.#token)
  }

  #read(id: string): { stored: StoredSession; events: SessionEvent[] } {
    encodeSessionId(id)
    const stored = this.#store.sessions.get(id)
    if (!stored) throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}'`, { sessionId: id })
    return { stored, events: stored.lines.map((line) => JSON.parse(line) as SessionEvent) }
  }

  async load(id: string, options: LoadOptions = {}): Promise<LoadedSession> {
    if (this.#open.has(id)) {
      throw new SessionPersistenceError('E_SESSION_LIVE', `session '${id}' is open in this instance`, { sessionId: id })
    }
    const { stored, events } = this.#read(id)
    this.#lock(id)
    const closers = options.closeOpenTurn === false ? [] : computeClosers(events, stored.meta.createdAt)
    const all = [...events, ...closers]
    if (closers.length > 0) {
      stored.lines.push(...closers.map((c) => JSON.stringify(c)))
    }
    this.#open.set(id, { meta: stored.meta, nextSeq: all.length, queue: new PQueue({ concurrency: 1 }), closing: undefined })
    const loaded: LoadedSession = { meta: structuredClone(stored.meta), events: all }
    if (closers.length > 0) {
      loaded.repair = { persisted: true, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
    }
    return loaded
  }

  async inspect(id: string): Promise<LoadedSession> {
    const { stored, events } = this.#read(id)
    const closers = computeClosers(events, stored.meta.createdAt)
    const loaded: LoadedSession = { meta: structuredClone(stored.meta), events: [...events, ...closers] }
    if (closers.length > 0) {
      loaded.repair = { persisted: false, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
    }
    return loaded
  }

  async list(_options: ListOptions = {}): Promise<SessionListing[]> {
    return [...this.#store.sessions.values()]
      .map((s) => ({
        meta: structuredClone(s.meta),
        location: this.locate(s.meta),
        sizeBytes: s.bytes,
        mtimeMs: s.mtimeMs,
      }))
      .sort((a, b) => b.meta.createdAt - a.meta.createdAt || (a.meta.id < b.meta.id ? -1 : a.meta.id > b.meta.id ? 1 : 0))
  }

  async delete(id: string): Promise<void> {
    throw new SessionPersistenceError('E_IO', `delete is not implemented yet (session '${id}')`, { sessionId: id })
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
}
