import PQueue from 'p-queue'
import { assertSeedLength, childMeta } from '../session/fork-point.js'
import { callOptions } from '../session/call-options.js'
import { computeClosers } from '../session/closers.js'
import { describeLocation } from '../session/location.js'
import { alreadyTracked } from '../session/already-tracked.js'
import { defaultLogger } from '../session/logger.js'
import { headerLine, metaFromHeader, validateMeta } from '../session/meta.js'
import { redactEvents } from '../session/redact.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { assertNotWrittenSince, parseDeleteOptions } from '../session/delete-options.js'
import type {
  DeleteOptions,
  ForkChild,
  ListOptions,
  LoadedSession,
  LoadOptions,
  PostgresLocation,
  RawPageOptions,
  RawSessionLog,
  RawSessionStream,
  SessionListing,
  SessionStore,
  ReadRange,
  SessionRange,
  WatchOptions,
  RawLogStreaming,
} from '../persistence.js'
import { parseListOrder, parseLoadFrom, parseReadRange, parseWatchOptions } from '../session/read-options.js'
import { applicationNameOf, describeServer, type PostgresConfig, parsePostgresConfig, type ResolvedPostgresConfig } from './config.js'
import { Db, dbError, isConnectionError } from './db.js'
import { deleteSession, sessionExists } from './delete-session.js'
import { type ForkWrite, forkSession, readForkPoint, rowIsOurs } from './fork-session.js'
import { CHECK_SESSION, checkSession, type SessionCheck } from './check-session.js'
import { HELD_SESSIONS, heldSessionIds } from './held-sessions.js'
import { checkRawLog } from './import-raw.js'
import { checkRawHeaderLine } from '../session/raw-log.js'
import { importRawStream, openRawStream } from './raw-stream.js'
import { listSessions } from './list-sessions.js'
import { LockConnection, lockClientOpener, sessionKey } from './lock-connection.js'
import { migrate, requireSchema } from './migrate.js'
import { notFound, parseStoredHeader, readEvents, readSnapshot, readStoredLog } from './read-session.js'
import { readRange } from './read-range.js'
import { findTailStart, type TailProbes, tailProbes } from './find-tail.js'
import { ChangeFeed } from './change-feed.js'
import { watchSource } from './watch-session.js'
import { watchLoop } from '../session/watch-loop.js'
import { checkId, newTracked, notWritable, serializeBatch, type Tracked } from './session-state.js'
import { claimSession, lockedBy, lockedError, readSessionRow } from './session-row.js'
import { SessionWriter } from './session-writer.js'

/** The PostgreSQL backend: the seam plus fork, closeAll, raw transfer, and `end()`. */
export interface PostgresSessionPersistence extends Omit<SessionStore, keyof RawLogStreaming>, RawLogStreaming {
  readonly schema: string
  locate(meta: SessionMeta): PostgresLocation
  /** Closes every session, then what the backend opened (its pool, its lock connection). Idempotent. */
  end(): Promise<void>
}

/**
 * Opens the PostgreSQL backend. No I/O happens here: the first operation creates or migrates
 * the schema (with `schemaSetup: 'existing'`, only checks it). Give `connectionString` (the
 * backend opens and ends its own pool) or `pool` (a `pg.Pool` the caller owns and ends).
 * `E_CONFIG` names a bad field.
 */
export function createPostgresPersistence(config: PostgresConfig): PostgresSessionPersistence {
  const c = parsePostgresConfig(config)
  const logger = c.logger ?? defaultLogger()
  const applicationName = applicationNameOf(c.host)
  const db = c.pool
    ? new Db(c.pool, { owned: false, logger }) // the caller's pool, with the caller's settings (its connect timeout too)
    : Db.open(c.connectionString!, c.poolSize, logger, applicationName, { connectTimeoutMs: c.connectTimeoutMs, server: describeServer(c) })
  const sessions = new Map<string, Tracked>()
  const lock = new LockConnection(lockClientOpener(c, applicationName), async (key) => {
    // A session is still ours while its row carries our token (or it has no row yet).
    const s = sessions.get(key.slice(c.schema.length + 1))
    if (s?.epoch === undefined) return false
    const { rows } = await db.query<{ ours: boolean }>(
      `SELECT writer_epoch = $2::bigint AS ours FROM "${c.schema}".sessions WHERE session_id = $1`,
      [s.id, s.epoch],
    )
    return rows[0]?.ours ?? !s.stored
  })
  const feed = new ChangeFeed(lockClientOpener(c, applicationName), c.schema, logger)
  return new PostgresPersistence(c, db, lock, sessions, feed)
}

class PostgresPersistence implements PostgresSessionPersistence {
  readonly #c: ResolvedPostgresConfig
  readonly #db: Db
  readonly #lock: LockConnection
  readonly #sessions: Map<string, Tracked>
  readonly #writer: SessionWriter
  readonly #feed: ChangeFeed
  /** The watchers' reads, a quarter of the pool at most (watch-session.ts). */
  readonly #watchReads: PQueue
  #ready: Promise<void> | undefined
  #ended: Promise<void> | undefined

  constructor(c: ResolvedPostgresConfig, db: Db, lock: LockConnection, sessions: Map<string, Tracked>, feed: ChangeFeed) {
    this.#c = c
    this.#feed = feed
    this.#watchReads = new PQueue({ concurrency: Math.max(1, Math.floor(c.poolSize / 4)) })
    this.#db = db
    this.#lock = lock
    this.#sessions = sessions
    this.#writer = new SessionWriter(c, db, lock)
  }

  get schema(): string {
    return this.#c.schema
  }

  locate(meta: SessionMeta): PostgresLocation {
    const valid = validateMeta(meta)
    checkId(valid.id)
    return { kind: 'postgres', schema: this.#c.schema, id: valid.id }
  }

  async create(meta: SessionMeta): Promise<void> {
    const valid = validateMeta(meta)
    checkId(valid.id)
    const s = this.#track(valid.id, 'E_EXISTS')
    await this.#run(s, async () => {
      await this.#assertAbsent(s)
      s.meta = valid
      s.version = this.#c.formatVersion // a new session is written in the configured version (§16)
      s.headerLine = headerLine(valid, s.version).slice(0, -1)
    })
  }

  async append(id: string, events: readonly SessionEvent[]): Promise<void> {
    const s = this.#sessions.get(id)
    if (!s || s.closing) throw notWritable(id)
    // Redacted as configured, then serialized in the session's version: captured now, later mutation changes nothing.
    const batch = serializeBatch(id, redactEvents(id, events, this.#c.redact), s.version)
    if (batch.count === 0) return
    await s.ops.run(() => {
      if (this.#sessions.get(id) !== s) throw notWritable(id)
      return this.#writer.append(s, batch)
    })
  }

  async load(id: string, options?: LoadOptions): Promise<LoadedSession> {
    checkId(id)
    const opts = callOptions(options, 'load')
    const closeOpenTurn = opts.closeOpenTurn !== false
    const from = parseLoadFrom(opts)
    const s = this.#track(id, 'E_SESSION_LIVE')
    return this.#run(s, async () => {
      await this.#ready_()
      // Found first, then locked: polling for a session that does not exist takes no lock.
      if (!(await sessionExists(this.#db, this.#c.schema, id))) throw notFound(id, s.path)
      await this.#writer.ensureHeld(s)
      // A tail load's probes come back with the claim (find-tail.ts): no round trip of their own.
      const tail = from === 'last-compaction'
      const probes = tail ? tailProbes(this.#c.schema) : undefined
      const head = await claimSession<Partial<TailProbes>>(this.#db, this.#c.schema, id, s.epoch!, this.#c.host, probes)
      if (!head) throw notFound(id, s.path)
      // Its format version says how its lines are checked and how the closers are written (§16).
      const header = parseStoredHeader(head.headerLine, id, s.path)
      const { version } = header
      // Under the lock: the rows below the length read by the claim stay as they are.
      // Its reads of a huge compaction or rewind come after the claim, outside the snapshot below:
      // a lock lost and the session deleted meanwhile must not read as damage either.
      const found = tail
        ? await findTailStart(this.#db, this.#c.schema, id, head as TailProbes, s.path, version).catch((err: unknown) => this.#lostOrDamaged(err, s))
        : undefined
      const firstSeq = found?.firstSeq ?? 0
      // One snapshot for the rows and any huge line read after them (read-session.ts): a lock
      // lost meanwhile and the session deleted by another instance never reads as damage. A huge
      // compaction or rewind the tail's search read already is taken as it read it.
      const read = { known: found?.huge }
      const { events } = await readSnapshot(this.#db, (client) => readEvents(client, this.#c.schema, id, s.path, firstSeq, head.length, version, read)).catch(
        (err: unknown) => this.#lostOrDamaged(err, s),
      )
      const log = { header, events }
      const meta = metaFromHeader(log.header)
      Object.assign(s, { meta, headerLine: head.headerLine, version, stored: true, nextSeq: head.length })
      // The tail holds the open turn's start: its closers are the full log's (seqs continue the tail).
      const closers = closeOpenTurn ? computeClosers(log.events, log.header.createdAt) : []
      if (closers.length > 0) {
        const { count, text, bytes, kinds } = serializeBatch(id, closers, version)
        await this.#writer.write(s, { sessionId: id, epoch: s.epoch!, firstSeq: head.length, count, text, bytes, kinds })
      }
      const loaded: LoadedSession = { meta: { ...meta }, events: closers.length > 0 ? [...log.events, ...closers] : log.events, firstSeq }
      if (closers.length > 0) loaded.repair = { persisted: true, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
      return loaded
    })
  }

  /**
   * A defect found by a load under the lock is damage only if the session is still ours: a row
   * gone is `E_NOT_FOUND`, another writer's token `E_LOCKED` (the lock was lost meanwhile).
   */
  async #lostOrDamaged(err: unknown, s: Tracked): Promise<never> {
    if (!isSessionPersistenceError(err, 'E_CORRUPT')) throw err
    const row = await readSessionRow(this.#db, this.#c.schema, s.id)
    if (!row) throw notFound(s.id, s.path)
    if (row.epoch !== s.epoch) throw lockedError(s.id, row, s.path, { lost: true })
    throw err
  }

  async inspect(id: string): Promise<LoadedSession> {
    checkId(id)
    await this.#ready_()
    const path = this.#path(id)
    try {
      const log = await readSnapshot(this.#db, (client) => readStoredLog(client, this.#c.schema, id, path))
      if (!log) throw notFound(id, path)
      const closers = computeClosers(log.events, log.header.createdAt)
      const loaded: LoadedSession = { meta: metaFromHeader(log.header), events: [...log.events, ...closers], firstSeq: 0 }
      if (closers.length > 0) loaded.repair = { persisted: false, droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
      return loaded
    } catch (err) {
      throw this.#wrap(err, `inspect session '${id}'`, id)
    }
  }

  /**
   * `inspect` without its events, in memory that does not grow with the session (check-session.ts):
   * the CLI's `verify` finds it by its registered symbol; not part of `SessionPersistence`.
   */
  async [CHECK_SESSION](id: string): Promise<SessionCheck> {
    checkId(id)
    await this.#ready_()
    const path = this.#path(id)
    try {
      return await checkSession(this.#db, this.#c.schema, id, path)
    } catch (err) {
      throw this.#wrap(err, `inspect session '${id}'`, id) // as inspect words it
    }
  }

  /**
   * The sessions among `ids` a writer holds now, each with the `E_LOCKED` a delete of it would
   * meet (its holder as the row records it), found without taking any lock (held-sessions.ts):
   * the CLI's `prune --dry-run` finds it by its registered symbol; not part of `SessionPersistence`.
   */
  async [HELD_SESSIONS](ids: readonly string[]): Promise<Map<string, SessionPersistenceError>> {
    for (const id of ids) checkId(id)
    await this.#ready_()
    try {
      const held = new Map<string, SessionPersistenceError>()
      for (const id of await heldSessionIds(this.#db, this.#c.schema, ids)) held.set(id, await lockedBy(this.#db, this.#c.schema, id, this.#path(id)))
      return held
    } catch (err) {
      throw this.#wrap(err, 'read which sessions are held')
    }
  }

  async list(options?: ListOptions): Promise<SessionListing[]> {
    const given = callOptions(options, 'list')
    const order = parseListOrder(given)
    await this.#ready_()
    const onProblem = given.onProblem ?? ((p) => this.#db.logger.warn(`skipped ${p.path}: ${p.message}`, p))
    try {
      return await listSessions(this.#db, this.#c.schema, onProblem, order)
    } catch (err) {
      throw this.#wrap(err, 'list sessions')
    }
  }

  async read(id: string, range?: ReadRange): Promise<SessionRange> {
    const parsed = parseReadRange(range)
    checkId(id)
    await this.#ready_()
    try {
      return await readRange(this.#db, this.#c.schema, id, parsed, this.#path(id))
    } catch (err) {
      throw this.#wrap(err, `read session '${id}'`, id)
    }
  }

  watch(id: string, options?: WatchOptions): AsyncIterable<SessionEvent> {
    const { fromSeq, signal } = parseWatchOptions(options)
    checkId(id)
    const source = watchSource(id, {
      db: this.#db,
      schema: this.#c.schema,
      feed: this.#feed,
      pollMs: this.#c.watchPollMs,
      retryTimeoutMs: this.#c.retryTimeoutMs,
      path: this.#path(id),
      ready: () => this.#ready_(),
      limit: (read) => this.#watchReads.add(read),
    })
    const wrap = (err: unknown) => this.#wrap(err, `watch session '${id}'`, id)
    return {
      async *[Symbol.asyncIterator]() {
        try {
          yield* watchLoop(source, fromSeq, signal)
        } catch (err) {
          throw wrap(err)
        }
      },
    }
  }

  async fork(parentId: string, child: ForkChild): Promise<SessionMeta> {
    checkId(parentId)
    assertSeedLength(child)
    const { seedLength } = child
    checkId(child.id)
    const s = this.#track(child.id, 'E_EXISTS')
    return this.#run(s, async () => {
      await this.#ready_()
      const header = await readForkPoint(this.#db, this.#c.schema, parentId, seedLength, this.#path(parentId))
      // The seed is read as inspect reads it (§4.7; each line's checksum, JSON, envelope and
      // seq, in passes that keep nothing): damage in it is E_CORRUPT here, as on JSONL, never
      // copied into a child nobody can load.
      if (seedLength > 0) {
        await readSnapshot(this.#db, (client) =>
          readEvents(client, this.#c.schema, parentId, this.#path(parentId), 0, seedLength, header.version, { onEvent: () => {} }),
        )
      }
      const meta = childMeta(parentId, header, child)
      await this.#assertAbsent(s)
      // A fork is written in its parent's version (§16).
      Object.assign(s, { meta, version: header.version, headerLine: headerLine(meta, header.version).slice(0, -1), nextSeq: seedLength })
      if (seedLength === 0) return meta // nothing to write: the lock is taken at the first append
      await this.#writer.ensureHeld(s)
      const f: ForkWrite = { parentId, meta, headerLine: s.headerLine!, seedLength, epoch: s.epoch!, host: this.#c.host }
      try {
        await forkSession(this.#db, this.#c.schema, f, s.path)
      } catch (err) {
        // An unanswered COMMIT: the child is ours exactly when its row carries our token.
        if (!isConnectionError(err) || !(await this.#isOurs(f.meta.id, f.epoch, f.headerLine))) throw err
      }
      s.stored = true
      return meta
    })
  }

  async delete(id: string, options?: DeleteOptions): Promise<void> {
    checkId(id)
    const condition = parseDeleteOptions(options, id)
    // Registered while it runs, as the JSONL backend does: a load, create or fork of this id in
    // this instance meanwhile is refused with E_SESSION_LIVE, not E_LOCKED against itself.
    const s = this.#track(id, 'E_SESSION_LIVE')
    const { path } = s
    const key = this.#key(id)
    // Admitted now, before any await: an end() called after this waits for the delete (on the
    // session's queue) instead of failing it half way.
    const ready = this.#ready_()
    try {
      await s.ops.run(async () => {
        await ready
        if (!(await sessionExists(this.#db, this.#c.schema, id))) throw notFound(id, path)
        if (!(await this.#lock.tryLock(key))) throw await lockedBy(this.#db, this.#c.schema, id, path)
        try {
          const outcome = await deleteSession(this.#db, this.#c.schema, id, condition.ifLastWriteAtOrBefore)
          if (outcome.kind === 'missing') throw notFound(id, path)
          if (outcome.kind === 'written-since') assertNotWrittenSince(condition, outcome.lastWriteMs, { sessionId: id, path })
        } finally {
          await this.#lock.unlock(key)
        }
      })
    } catch (err) {
      throw this.#wrap(err, `delete session '${id}'`, id)
    } finally {
      if (this.#sessions.get(id) === s) this.#sessions.delete(id)
    }
  }

  async readRaw(id: string): Promise<RawSessionLog> {
    checkId(id)
    await this.#ready_()
    const path = this.#path(id)
    try {
      const log = await readSnapshot(this.#db, (client) => readStoredLog(client, this.#c.schema, id, path, { keepLines: true }))
      if (!log) throw notFound(id, path)
      return { id, headerLine: log.headerLine, eventLines: log.lines! }
    } catch (err) {
      throw this.#wrap(err, `read session '${id}'`, id)
    }
  }

  async importRaw(log: RawSessionLog): Promise<void> {
    checkId(log?.id)
    // Checked whole before anything is taken, then imported as a stream of its lines (copied now).
    const { stream, kinds } = checkRawLog(log, this.#path(log.id))
    await this.#importRaw(stream, kinds)
  }

  async openRawStream(id: string, options?: RawPageOptions): Promise<RawSessionStream> {
    checkId(id)
    await this.#ready_()
    const path = this.#path(id)
    try {
      const stream = await openRawStream(this.#db, this.#c.schema, id, path, options)
      const wrap = (err: unknown) => this.#wrap(err, `read session '${id}'`, id)
      const pages = stream.eventPages
      return {
        id,
        headerLine: stream.headerLine,
        eventPages: {
          async *[Symbol.asyncIterator]() {
            try {
              yield* pages
            } catch (err) {
              throw wrap(err)
            }
          },
        },
      }
    } catch (err) {
      throw this.#wrap(err, `read session '${id}'`, id)
    }
  }

  async importRawStream(log: RawSessionStream): Promise<{ eventLines: number }> {
    checkId(log?.id)
    checkRawHeaderLine(log.id, log.headerLine)
    return this.#importRaw(log)
  }

  /** Both imports: under the session's lock and writer token, `E_EXISTS` when it is stored; `kinds` when checked already. */
  async #importRaw(log: RawSessionStream, kinds?: readonly number[]): Promise<{ eventLines: number }> {
    const { id, headerLine } = log
    const s = this.#track(id, 'E_EXISTS')
    try {
      return await this.#run(s, async () => {
        await this.#assertAbsent(s)
        await this.#writer.ensureHeld(s)
        try {
          return await importRawStream(this.#db, this.#c.schema, log, { epoch: s.epoch!, host: this.#c.host }, s.path, kinds)
        } catch (err) {
          // An unanswered COMMIT: the session is ours exactly when its row carries our token.
          if (!isConnectionError(err) || !(await this.#isOurs(id, s.epoch!, headerLine))) throw err
          return { eventLines: kinds?.length ?? (await readSessionRow(this.#db, this.#c.schema, id))?.length ?? 0 }
        }
      })
    } finally {
      await this.close(id)
    }
  }

  close(id: string): Promise<void> {
    const s = this.#sessions.get(id)
    if (!s) return Promise.resolve()
    s.closing ??= (async () => {
      await s.ops.idle()
      try {
        if (s.epoch !== undefined) await this.#lock.unlock(this.#key(id))
      } finally {
        if (this.#sessions.get(id) === s) this.#sessions.delete(id)
      }
    })()
    return s.closing
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#sessions.keys()].map((id) => this.close(id)))
  }

  end(): Promise<void> {
    this.#ended ??= (async () => {
      await this.closeAll()
      await this.#feed.end()
      await this.#lock.end().catch(() => {})
      await this.#db.end()
    })()
    return this.#ended
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.end()
  }

  /**
   * Creates or migrates the schema once (or, with `schemaSetup: 'existing'`, checks that it is
   * there at this release's version), and checks the server's fsync setting.
   */
  #ready_(): Promise<void> {
    if (this.#ended) {
      return Promise.reject(new SessionPersistenceError('E_DISPOSED', 'this PostgreSQL store was ended'))
    }
    this.#ready ??= (async () => {
      if (this.#c.schemaSetup === 'existing') await requireSchema(this.#db, this.#c.schema, describeServer(this.#c))
      else await migrate(this.#db, this.#c.schema, { deadline: Date.now() + Math.max(this.#c.retryTimeoutMs, 60_000) })
      await this.#db.checkFsync()
    })().catch((err: unknown) => {
      this.#ready = undefined
      throw this.#wrap(err, `prepare PostgreSQL schema "${this.#c.schema}"`)
    })
    return this.#ready
  }

  async #assertAbsent(s: Tracked): Promise<void> {
    await this.#ready_()
    if (await sessionExists(this.#db, this.#c.schema, s.id)) {
      throw new SessionPersistenceError('E_EXISTS', `a log for session '${s.id}' already exists`, {
        sessionId: s.id,
        path: s.path,
      })
    }
  }

  /** Whether an unanswered COMMIT that created `id` landed (false when that cannot be known either). */
  #isOurs(id: string, epoch: string, headerLine: string): Promise<boolean> {
    return rowIsOurs(this.#db, this.#c.schema, id, epoch, headerLine).catch(() => false)
  }

  #key(id: string): string {
    return sessionKey(this.#c.schema, id)
  }

  #path(id: string): string {
    return describeLocation({ kind: 'postgres', schema: this.#c.schema, id })
  }

  /** Registers `id` synchronously, so a concurrent create/load/fork of it is refused with `code`. */
  #track(id: string, code: 'E_EXISTS' | 'E_SESSION_LIVE'): Tracked {
    if (this.#sessions.has(id)) throw alreadyTracked(id, code)
    const s = newTracked(id, this.#path(id))
    this.#sessions.set(id, s)
    return s
  }

  /** Runs the opening job of a tracked session; on failure it is untracked and its lock released. */
  async #run<T>(s: Tracked, job: () => Promise<T>): Promise<T> {
    try {
      return await s.ops.run(job)
    } catch (err) {
      if (this.#sessions.get(s.id) === s) this.#sessions.delete(s.id)
      if (s.epoch !== undefined) await this.#lock.unlock(this.#key(s.id)).catch(() => {})
      throw this.#wrap(err, `open session '${s.id}'`, s.id)
    }
  }

  #wrap(err: unknown, what: string, sessionId?: string): SessionPersistenceError {
    return dbError(err, what, sessionId)
  }
}
