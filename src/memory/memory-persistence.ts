import { assertSeedLength, childMeta } from '../session/fork-point.js'
import { EventEmitter } from 'eventemitter3'
import { hostname } from 'node:os'
import PQueue from 'p-queue'
import { callOptions } from '../session/call-options.js'
import { computeClosers } from '../session/closers.js'
import { encodeSessionId } from '../session/id-encoding.js'
import { headerLine, metaFromHeader, validateMeta } from '../session/meta.js'
import { bucketName, logFileName } from '../jsonl/paths.js'
import { prepareBatch } from '../session/prepare-batch.js'
import { DEFAULT_FORMAT_VERSION, FORMAT_VERSIONS, type FormatVersion, sealLine, unsealText } from '../session/line-codec.js'
import { checkRawEventLine, checkRawStreamHeader, rawLogToBytes, rawPagesOnce, rawStreamPages } from '../session/raw-log.js'
import { redactEvents } from '../session/redact.js'
import type { z } from 'zod'
import type { SessionEvent, SessionHeader, SessionMeta, SharedConfigSchema } from '../session/schema.js'
import { ioError, SessionPersistenceError } from '../errors.js'
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
import { listingOrder, parseListOrder, parseLoadFrom, parseRawPageOptions, parseReadRange, parseWatchOptions, rangeBounds } from '../session/read-options.js'
import { tailStartOf } from '../session/tail-start.js'
import { watchLoop } from '../session/watch-loop.js'

interface StoredSession {
  meta: SessionMeta
  /** The format version of its lines (§16). */
  version: FormatVersion
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

  /** Releases `id`'s writer lock, with when it was taken (a long-lived store keeps no entry per id it ever wrote). */
  unlock(id: string): void {
    this.locks.delete(id)
    this.lockedSince.delete(id)
  }
  /** Told the id of every session whose stored lines changed (appended, published, deleted). */
  readonly changes = new EventEmitter<{ change: [id: string] }>()
}

const namedStores = new Map<string, MemoryStore>()

/** `formatVersion` (§16; default 1) and `redact` as every backend takes them (`SharedConfigSchema`), checked here without zod. */
export interface MemoryPersistenceOptions extends Pick<z.input<typeof SharedConfigSchema>, 'formatVersion' | 'redact'> {
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
  const formatVersion = options.formatVersion ?? DEFAULT_FORMAT_VERSION
  if (!FORMAT_VERSIONS.includes(formatVersion)) throw new SessionPersistenceError('E_CONFIG', `formatVersion must be 0 or 1, not ${JSON.stringify(formatVersion)}`)
  if (options.redact !== undefined && typeof options.redact !== 'function') throw new SessionPersistenceError('E_CONFIG', 'redact must be a function')
  return new MemoryPersistence(store ?? new MemoryStore(), options.name ?? 'memory', formatVersion, options.redact)
}

interface Open {
  meta: SessionMeta
  version: FormatVersion
  nextSeq: number
  /** The log this instance writes: loaded, forked with a seed, or published by its first append. */
  stored: StoredSession | undefined
  queue: PQueue
  closing: Promise<void> | undefined
}

const withoutNewline = (line: string) => line.slice(0, -1)

/** An event of a stored line (checked when it was stored): version 1 without its checksum. */
function decodeLine(line: string, version: FormatVersion): SessionEvent {
  return JSON.parse(version === 1 ? unsealText(line) : line) as SessionEvent
}

class MemoryPersistence implements SessionStore {
  readonly #store: MemoryStore
  readonly #name: string
  readonly #open = new Map<string, Open>()
  /** The ids an `importRawStream` of this instance holds while its pages come. */
  readonly #importing = new Set<string>()
  readonly #token = {}
  readonly #formatVersion: FormatVersion
  readonly #redact: ((event: SessionEvent) => SessionEvent) | undefined

  constructor(store: MemoryStore, name: string, formatVersion: FormatVersion, redact: ((event: SessionEvent) => SessionEvent) | undefined) {
    this.#redact = redact
    this.#store = store
    this.#name = name
    this.#formatVersion = formatVersion
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
    this.#track(valid, 0, undefined, this.#formatVersion)
  }

  #track(meta: SessionMeta, nextSeq: number, stored: StoredSession | undefined, version: FormatVersion): void {
    this.#open.set(meta.id, { meta, version, nextSeq, stored, queue: new PQueue({ concurrency: 1 }), closing: undefined })
  }

  async append(id: string, events: readonly SessionEvent[]): Promise<void> {
    const s = this.#open.get(id)
    if (!s || s.closing) {
      if (typeof id !== 'string') throw new SessionPersistenceError('E_INVALID_ID', `session id must be a non-empty string, got ${typeof id}`)
      throw new SessionPersistenceError('E_NOT_FOUND', `session '${id}' is not open for appends`, { sessionId: id })
    }
    const batch = prepareBatch(id, redactEvents(id, events, this.#redact), s.version)
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
        if (stored) {
          // Nothing is written, nor ever will be: the lock goes, so that the log's owner can resume it.
          this.#store.unlock(id)
          throw new SessionPersistenceError('E_EXISTS', `a log for session '${id}' already exists`, { sessionId: id })
        }
        stored = this.#publish(s.meta, [], s.version)
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

  #publish(meta: SessionMeta, lines: string[], version: FormatVersion): StoredSession {
    const header = headerLine(meta, version)
    const stored: StoredSession = {
      meta,
      version,
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
    return { stored, events: stored.lines.map((line) => decodeLine(line, stored.version)) }
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
      const line = sealLine(JSON.stringify(c), stored.version)
      stored.lines.push(line)
      stored.bytes += Buffer.byteLength(line) + 1
      stored.mtimeMs = Date.now()
    }
    if (closers.length > 0) this.#store.changes.emit('change', id)
    this.#track(stored.meta, all.length, stored, stored.version)
    // Found in the stored events, as a load from disk finds it before its repair: a turn still
    // open at their end starts the tail (§15.1), though the closers now end it.
    const firstSeq = from === 'last-compaction' ? tailStartOf(events) : 0
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
    const events = stored.lines.slice(from, to).map((line) => decodeLine(line, stored.version))
    return { meta: structuredClone(stored.meta), events, firstSeq: from, length: stored.lines.length }
  }

  watch(id: string, options?: WatchOptions): AsyncIterable<SessionEvent> {
    const { fromSeq, signal } = parseWatchOptions(options)
    encodeSessionId(id)
    const { changes } = this.#store
    let wake: (() => void) | undefined
    let watched: StoredSession | undefined // the stored session the first look found
    let watchedLength = 0
    const listener = (changed: string) => {
      if (changed === id) wake?.()
    }
    // Subscribed at the first wait (before the first poll), not here: a watch never iterated
    // never reaches the loop's `finally`, and would hold its listener for good.
    let subscribed = false
    return watchLoop(
      {
        poll: async (next) => {
          const stored = this.#store.sessions.get(id)
          if (!stored) return { kind: 'missing' }
          // Another stored session under the id (deleted and re-created since the last look) is
          // a delete (§15.3): the watch ends yielding none of it.
          if (watched === undefined) watched = stored
          else if (stored !== watched || stored.lines.length < watchedLength) return { kind: 'missing' }
          watchedLength = stored.lines.length
          return { kind: 'events', events: stored.lines.slice(next).map((line) => decodeLine(line, stored.version)) }
        },
        changed: (stop) =>
          new Promise<void>((resolve) => {
            if (!subscribed) {
              subscribed = true
              changes.on('change', listener)
            }
            if (stop.aborted) return resolve()
            // One abort listener per wait, removed when the wait ends: the loop passes the same
            // signal to every wait of a watcher.
            const done = () => {
              stop.removeEventListener('abort', done)
              if (wake === done) wake = undefined
              resolve()
            }
            wake = done
            stop.addEventListener('abort', done, { once: true })
          }),
        close: () => {
          if (subscribed) changes.off('change', listener)
          subscribed = false
        },
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
      this.#store.unlock(id) // refused: the lock goes, the session stays as it was
      throw err
    }
    this.#store.sessions.delete(id)
    this.#store.unlock(id)
    this.#store.changes.emit('change', id)
  }

  async fork(parentId: string, child: ForkChild): Promise<SessionMeta> {
    // Checked in the JSONL backend's order: the ids, the seed length, a child this instance
    // tracks (before any read), then the parent and the fork point.
    encodeSessionId(parentId)
    assertSeedLength(child)
    const { seedLength } = child
    encodeSessionId(child.id)
    if (this.#open.has(child.id)) {
      throw new SessionPersistenceError('E_EXISTS', `session '${child.id}' already exists`, { sessionId: child.id })
    }
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
      stored = this.#publish(meta, parent.lines.slice(0, seedLength), parent.version)
    }
    this.#track(meta, seedLength, stored, parent.version)
    return structuredClone(meta)
  }

  async readRaw(id: string): Promise<RawSessionLog> {
    const { stored } = this.#read(id)
    return { id, headerLine: stored.headerLine, eventLines: [...stored.lines] }
  }

  async importRaw(log: RawSessionLog): Promise<void> {
    // The same checks as the JSONL backend's importRaw: header, checksums, envelopes, seqs.
    const { header } = rawLogToBytes(log)
    this.#assertImportable(log.id)
    this.#lock(log.id)
    this.#publishRaw(header, log.headerLine, [...log.eventLines])
    this.#store.unlock(log.id)
  }

  /** `E_EXISTS` when `id` is stored, or tracked or being imported by this instance (as JSONL's `#track`). */
  #assertImportable(id: string): void {
    if (this.#open.has(id) || this.#importing.has(id) || this.#store.sessions.has(id)) {
      throw new SessionPersistenceError('E_EXISTS', `session '${id}' already exists`, { sessionId: id })
    }
  }

  /** Stores an imported session: its header line and lines as given (checked by the caller). */
  #publishRaw(header: SessionHeader, headerLine: string, lines: string[]): void {
    const stored = this.#publish(metaFromHeader(header), lines, header.version)
    stored.headerLine = headerLine
    stored.bytes = Buffer.byteLength(headerLine) + 1 + lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
  }

  async openRawStream(id: string, options?: RawPageOptions): Promise<RawSessionStream> {
    const { pageLines } = parseRawPageOptions(options)
    const { stored } = this.#read(id)
    const sessions = this.#store.sessions
    // Read when iterated, up to the lines stored then, as the other backends read (§15.5); the
    // session deleted (or deleted and created again) since the open is E_NOT_FOUND, as on them.
    async function* eventPages(): AsyncGenerator<readonly string[]> {
      const gone = () => new SessionPersistenceError('E_NOT_FOUND', `session '${id}' was deleted while it was read`, { sessionId: id })
      if (sessions.get(id) !== stored) throw gone()
      const length = stored.lines.length
      for (let i = 0; i < length; i += pageLines) {
        if (sessions.get(id) !== stored) throw gone()
        yield stored.lines.slice(i, Math.min(i + pageLines, length))
      }
    }
    return { id, headerLine: stored.headerLine, eventPages: rawPagesOnce(id, eventPages) }
  }

  async importRawStream(log: RawSessionStream): Promise<{ eventLines: number }> {
    // Checked and taken as the other backends take it: the header, then the id (E_EXISTS, or
    // E_LOCKED while another instance holds it), held (locked, and E_EXISTS to this instance)
    // while the pages come, each line checked as it comes. Nothing here is bounded by a page:
    // the in-memory store holds every session whole anyway.
    const header = checkRawStreamHeader(log)
    const { id } = log
    this.#assertImportable(id)
    this.#lock(id)
    this.#importing.add(id)
    try {
      const eventLines: string[] = []
      for await (const page of rawStreamPages(log)) {
        for (const line of page) {
          checkRawEventLine(id, line, eventLines.length, header.version)
          eventLines.push(line as string)
        }
      }
      if (this.#store.sessions.has(id)) throw new SessionPersistenceError('E_EXISTS', `a log for session '${id}' already exists`, { sessionId: id })
      this.#publishRaw(header, log.headerLine, eventLines)
      return { eventLines: eventLines.length }
    } catch (err) {
      throw ioError(err, `import session '${id}'`, { sessionId: id })
    } finally {
      this.#importing.delete(id)
      if (this.#store.locks.get(id) === this.#token) this.#store.unlock(id)
    }
  }

  close(id: string): Promise<void> {
    const s = this.#open.get(id)
    if (!s) return Promise.resolve()
    s.closing ??= s.queue.onIdle().then(() => {
      this.#open.delete(id)
      if (this.#store.locks.get(id) === this.#token) this.#store.unlock(id)
    })
    return s.closing
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#open.keys()].map((id) => this.close(id)))
  }
}
