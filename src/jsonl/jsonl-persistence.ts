import { readBytes } from './read-range.js'
import { copyRange } from './copy-range.js'
import { dirname } from 'node:path'
import { callOptions } from '../session/call-options.js'
import { syncDir } from './durable.js'
import { findLogs, findOneLog } from './find-logs.js'
import { assertSeedLength, forkMetaAt } from '../session/fork-point.js'
import { encodeSessionId } from '../session/id-encoding.js'
import { listSessions } from './list-sessions.js'
import { LogWriter } from './log-writer.js'
import { type BodyWriter, materialize } from './materialize.js'
import { headerLine, metaFromHeader, validateMeta } from '../session/meta.js'
import { openLog } from './open-log.js'
import { logPath } from './paths.js'
import { type PreparedBatch, prepareBatch } from '../session/prepare-batch.js'
import { redactEvents } from '../session/redact.js'
import { checkLogIn } from './check-log.js'
import { rawLogFromBytes, rawLogToBytes } from '../session/raw-log.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import type { JsonlConfig, SessionEvent, SessionMeta } from '../session/schema.js'
import { createStoreContext, type StoreContext } from './store-context.js'
import { newTracked, notWritable, type Tracked } from './tracked.js'
import { alreadyTracked } from '../session/already-tracked.js'
import { ioError, isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { SessionLocks } from './lock/session-lock.js'
import { assertNotWrittenSince, parseDeleteOptions } from '../session/delete-options.js'
import { parseListOrder, parseLoadFrom, parseReadRange, parseWatchOptions } from '../session/read-options.js'
import { watchLoop } from '../session/watch-loop.js'
import { readSessionRange } from './read-session.js'
import { openJsonlRawStream, writeRawStream } from './raw-stream.js'
import { checkRawHeaderLine } from '../session/raw-log.js'
import { jsonlWatchSource } from './watch-log.js'
import { assertMigratable, findDamage, keptAsideName, migratedBody, planRedaction, redactedBody, redactEvent, truncatedBody } from './maintenance.js'
import { rewriteLog, writeBeside } from './rewrite-log.js'
import { readHeaderLine } from './read-session.js'
import type { FileHandle } from './fs/file-system.js'
import { parseMaintenanceOptions, parseRedactOptions } from '../session/maintenance-options.js'
import type {
  DeleteOptions,
  ForkChild,
  JsonlLocation,
  JsonlSessionPersistence,
  ListOptions,
  LoadedSession,
  LoadOptions,
  MigrateReport,
  RawPageOptions,
  RedactReport,
  TruncateReport,
  RawSessionLog,
  RawSessionStream,
  ReadRange,
  SessionListing,
  SessionRange,
  WatchOptions,
} from '../persistence.js'

/** Above this, a new log's first lines are written after its header instead of joined to it. */
const JOIN_MAX = 1 << 20

/**
 * A new log's first bytes: its header and first lines, one buffer when they are small; a large
 * batch (a huge tool result, §15.5) is written after the header, never copied to join it.
 */
function firstBody(header: string, lines: Buffer): { bytes: Buffer | BodyWriter; length: number } {
  const head = Buffer.from(header)
  const length = head.length + lines.length
  if (lines.length < JOIN_MAX) return { bytes: Buffer.concat([head, lines], length), length }
  return {
    bytes: async (write) => {
      await write(head)
      await write(lines)
    },
    length,
  }
}

/**
 * A fork's first bytes: its header, then the parent's seed lines `[from, to)` read from its open
 * `parent`. A small seed is read and joined to the header (one write, as `firstBody`); a larger
 * one is copied a bounded chunk at a time (§15.5: a fork of a parent of any length).
 */
async function seedBody(parent: FileHandle, parentPath: string, header: string, from: number, to: number): Promise<{ bytes: Buffer | BodyWriter; length: number }> {
  if (to - from < JOIN_MAX) return firstBody(header, await readBytes(parent, parentPath, from, to))
  const head = Buffer.from(header)
  return {
    bytes: async (write) => {
      await write(head)
      await copyRange(parent, parentPath, from, to, write)
    },
    length: head.length + (to - from),
  }
}

/** Never reached: a first append sets what its link waits for before its first await. */
function notYetLocked(): Promise<never> {
  return Promise.reject(new Error('a new log was about to be published before its writer lock was asked for'))
}

interface ReadOptions {
  /** Compute the closers of an open final turn (inspect) or not (fork, raw reads). */
  closeOpenTurn: boolean
  /**
   * A fork's pass (§4.7, §15.5): keep no event (every line is still checked) and note the type
   * and end offset of event `forkPoint - 1`, where the seed ends.
   */
  forkPoint?: number
}

/**
 * The crash-safe JSONL backend (docs/contract.md §3–6). Creating it does no I/O; the root is created on
 * first need. Throws `E_CONFIG` naming the field for an invalid configuration.
 */
export function createJsonlPersistence(config: JsonlConfig): JsonlSessionPersistence {
  const { ctx, staleLockMs } = createStoreContext(config)
  return new JsonlPersistence(ctx, staleLockMs)
}

class JsonlPersistence implements JsonlSessionPersistence {
  readonly #ctx: StoreContext
  readonly #locks: SessionLocks
  readonly #sessions = new Map<string, Tracked>()

  constructor(ctx: StoreContext, staleLockMs: number) {
    this.#ctx = ctx
    this.#locks = new SessionLocks(ctx, staleLockMs)
  }

  get root(): string {
    return this.#ctx.root
  }

  locate(meta: SessionMeta): JsonlLocation {
    const valid = validateMeta(meta)
    return { kind: 'jsonl', path: logPath(this.#ctx.root, valid.id, valid.cwd) }
  }

  async create(meta: SessionMeta): Promise<void> {
    const valid = validateMeta(meta)
    const s = this.#track(valid.id, 'E_EXISTS')
    await this.#run(s, async () => {
      const path = logPath(this.#ctx.root, valid.id, valid.cwd)
      await this.#assertNoLog(valid.id, path)
      s.meta = valid
      s.path = path
      s.version = this.#ctx.formatVersion
    })
  }

  async append(id: string, events: readonly SessionEvent[]): Promise<void> {
    const s = this.#sessions.get(id)
    if (!s || s.closing) throw notWritable(id)
    // While the lease is fresh this is undefined and the append makes no call for the lock.
    // When it is not, and nothing of ours is queued, the confirmation starts now and overlaps
    // the serialization: nothing of this session is written between its start and this write.
    const early = s.lock && s.ops.idleNow && Array.isArray(events) && events.length > 0 ? s.lock.assertHeld() : undefined
    early?.catch(() => {}) // awaited in the job; never an unhandled rejection
    const batch = prepareBatch(id, redactEvents(id, events, this.#ctx.redact), s.version) // captured now: later mutation changes nothing
    if (batch.count === 0) return
    await s.ops.run(() => this.#appendNow(s, batch, early))
  }

  async #appendNow(s: Tracked, batch: PreparedBatch, earlyLockCheck?: Promise<void>): Promise<void> {
    if (this.#sessions.get(s.id) !== s || !s.meta || !s.path) throw notWritable(s.id)
    const broken = s.broken ?? s.writer?.broken
    if (broken) throw broken
    if (batch.firstSeq !== s.nextSeq) {
      throw new SessionPersistenceError(
        'E_SEQ_NOT_CONTIGUOUS',
        `session '${s.id}': the batch starts at seq ${batch.firstSeq}, the log continues at ${s.nextSeq}`,
        { sessionId: s.id, path: s.path },
      )
    }
    // A first append starts the log's temporary file before it takes the lock: writing and
    // syncing that file is the longer path; the lock and the under-lock check of the other
    // buckets overlap with it, and the link waits for both (`mayPublish`, set below before any
    // await, long before the materialization asks for it).
    const { writer, path } = s
    let mayPublish: Promise<void> | undefined
    const materializing = writer ? undefined : this.#materialize(s, path, firstBody(headerLine(s.meta, s.version), batch.bytes), () => mayPublish ?? notYetLocked())
    materializing?.catch(() => {}) // awaited below
    const locked = s.lock ? (earlyLockCheck ?? s.lock.assertHeld()) : this.#locks.acquire(s.id).then((l) => void (s.lock = l))
    try {
      if (writer) {
        if (locked) await locked
        await writer.append(batch.bytes)
      } else {
        mayPublish = (locked ?? Promise.resolve()).then(() => this.#assertNoLog(s.id, path))
        mayPublish.catch(() => {})
        s.writer = await materializing
      }
    } catch (err) {
      await locked?.catch(() => {}) // a lock still being taken must land before close can release it
      // A first append refused because the log exists (another instance published it since
      // `create`) writes nothing and never will: the lock goes, so that its owner can resume it.
      if (!writer && isSessionPersistenceError(err) && err.code === 'E_EXISTS' && s.lock) {
        const lock = s.lock
        s.lock = undefined
        await lock.release().catch((e: unknown) => this.#ctx.logger.warn(`session '${s.id}': releasing the lock after E_EXISTS failed: ${e instanceof Error ? e.message : String(e)}`, e))
      }
      throw this.#wrap(err, `append to session '${s.id}'`, s)
    }
    s.nextSeq += batch.count
  }

  /** `mayPublish` resolves once the lock is held and no other bucket holds this id. */
  async #materialize(s: Tracked, path: string, body: { bytes: Buffer | BodyWriter; length: number }, mayPublish: () => Promise<void>): Promise<LogWriter> {
    try {
      const handle = await materialize(this.#ctx, path, body.bytes, { sessionId: s.id, beforeLink: mayPublish })
      return new LogWriter(this.#ctx, s.id, path, handle, body.length)
    } catch (err) {
      if ((err as { published?: unknown }).published === true) {
        s.broken = new SessionPersistenceError(
          'E_WRITER_BROKEN',
          `the log of session '${s.id}' was published but could not be made durable or taken back; close and load it again`,
          { sessionId: s.id, path, cause: err },
        )
      }
      throw err
    }
  }

  async load(id: string, options?: LoadOptions): Promise<LoadedSession> {
    encodeSessionId(id)
    const opts = callOptions(options, 'load')
    const closeOpenTurn = opts.closeOpenTurn !== false
    const from = parseLoadFrom(opts)
    const s = this.#track(id, 'E_SESSION_LIVE')
    return this.#run(s, async () => {
      // Find first, then lock, then find again under the lock: an id with no log is never
      // locked, so polling for a session that does not exist yet cannot delay its creator.
      // (A failed load releases s.lock in #run.)
      await findOneLog(this.#ctx, id)
      s.lock = await this.#locks.acquire(id)
      const path = await findOneLog(this.#ctx, id)
      const lock = s.lock
      const { writer, loaded, version } = await openLog(this.#ctx, id, path, { closeOpenTurn, from, beforeWrite: () => lock.assertHeld() })
      Object.assign(s, { writer, path, meta: loaded.meta, version, nextSeq: loaded.firstSeq + loaded.events.length })
      return { ...loaded, meta: { ...loaded.meta } }
    })
  }

  async inspect(id: string): Promise<LoadedSession> {
    encodeSessionId(id)
    try {
      const path = await findOneLog(this.#ctx, id)
      const { scan, plan } = await this.#read(id, path, { closeOpenTurn: true })
      const loaded: LoadedSession = { meta: metaFromHeader(scan.header), events: [...scan.events, ...plan.closers], firstSeq: 0 }
      if (plan.report) loaded.repair = { persisted: false, ...plan.report }
      return loaded
    } catch (err) {
      throw this.#wrap(err, `inspect session '${id}'`)
    }
  }

  /** Read-only scan; a log this instance is writing is read up to its acknowledged length. */
  async #read(id: string, path: string, options: ReadOptions) {
    return this.#withLog(path, (handle) => this.#scan(id, path, handle, options))
  }

  /** As #read, on a log already open: what is read after it comes from the same file. */
  async #scan(id: string, path: string, handle: FileHandle, options: ReadOptions) {
    const { closeOpenTurn, forkPoint } = options
    const to = this.#readableSize(id, path)
    const fork = forkPoint === undefined ? {} : { keepEvents: false, ...(forkPoint > 0 ? { markSeq: forkPoint - 1 } : {}) }
    const scan = await scanLog(handle, { path, sessionId: id, ...fork, ...(to === undefined ? {} : { to }) })
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn })
    return { scan, plan }
  }

  /**
   * Runs `use` on the log at `path` opened once for reading. A scan and a read of the bytes it
   * found run on one descriptor: a rewrite renamed over the path in between (redact, migrate or
   * repair in another process, which hold the lock a reader does not take) cannot make the second
   * read land in another file at the first one's offsets.
   */
  async #withLog<T>(path: string, use: (handle: FileHandle) => Promise<T>): Promise<T> {
    const handle = await this.#ctx.fs.open(path, 'r')
    try {
      return await use(handle)
    } finally {
      await handle.close()
    }
  }

  async read(id: string, range?: ReadRange): Promise<SessionRange> {
    const parsed = parseReadRange(range)
    encodeSessionId(id)
    try {
      const path = await findOneLog(this.#ctx, id)
      const handle = await this.#ctx.fs.open(path, 'r')
      try {
        return await readSessionRange(handle, id, path, parsed, this.#readableSize(id, path) ?? (await handle.stat()).size)
      } finally {
        await handle.close()
      }
    } catch (err) {
      throw this.#wrap(err, `read session '${id}'`)
    }
  }

  watch(id: string, options?: WatchOptions): AsyncIterable<SessionEvent> {
    const { fromSeq, signal } = parseWatchOptions(options)
    encodeSessionId(id)
    return watchLoop(jsonlWatchSource(this.#ctx, id), fromSeq, signal)
  }

  /** The acknowledged length of a log this instance is writing (an append in flight is no torn tail). */
  #readableSize(id: string, path: string): number | undefined {
    const live = this.#sessions.get(id)
    return live?.writer && live.path === path ? live.writer.size : undefined
  }

  async list(options?: ListOptions): Promise<SessionListing[]> {
    const opts = callOptions(options, 'list')
    const order = parseListOrder(opts)
    const onProblem = opts.onProblem ?? ((p) => this.#ctx.logger.warn(`skipped ${p.path}: ${p.message}`, p))
    try {
      return await listSessions(this.#ctx, onProblem, order)
    } catch (err) {
      throw this.#wrap(err, 'list sessions')
    }
  }

  async fork(parentId: string, child: ForkChild): Promise<SessionMeta> {
    encodeSessionId(parentId)
    assertSeedLength(child)
    encodeSessionId(child.id)
    const s = this.#track(child.id, 'E_EXISTS')
    return this.#run(s, async () => {
      // The parent is only read; an absent parent takes no lock.
      const parentPath = await findOneLog(this.#ctx, parentId)
      // The parent is opened once: its seed is copied from the file that was scanned, even if a
      // rewrite of the parent (it holds the lock fork never takes) renames a new log over it
      // meanwhile; it stays open until the child is published, the seed streamed from it. Its
      // close comes after the child is published, so a failure of it (a read-only descriptor:
      // nothing depends on it) is logged, never a rejection of a fork whose child exists.
      const parent = await this.#ctx.fs.open(parentPath, 'r')
      const closeParent = () =>
        parent.close().catch((err: unknown) => this.#ctx.logger.warn(`fork of '${parentId}': closing the parent's log failed: ${err instanceof Error ? err.message : String(err)}`, err))
      try {
        // Memory (§15.5): the scan keeps no event, only their count and where the seed ends.
        const { scan } = await this.#scan(parentId, parentPath, parent, { closeOpenTurn: false, forkPoint: child.seedLength })
        const { header, headerBytes, mark } = scan
        const meta = forkMetaAt({ id: parentId, path: parentPath, header, stored: scan.eventCount, seedEndType: mark?.type }, child)
        const path = logPath(this.#ctx.root, meta.id, meta.cwd)
        await this.#assertNoLog(meta.id, path)
        // A fork is written in its parent's version (§16): its seed lines are the parent's bytes.
        const version = header.version
        Object.assign(s, { meta, path, nextSeq: child.seedLength, version })
        // No mark: seedLength 0 (any other fork point was refused without its turn/end).
        if (!mark) return meta // nothing to write: the lock is taken at the first append
        s.lock = await this.#locks.acquire(meta.id)
        const body = await seedBody(parent, parentPath, headerLine(meta, version), headerBytes, mark.end)
        s.writer = await this.#materialize(s, path, body, () => this.#assertNoLog(meta.id, path))
        return meta
      } finally {
        await closeParent()
      }
    })
  }

  close(id: string): Promise<void> {
    const s = this.#sessions.get(id)
    // Not open here: a close retried after its release failed retries that release (no
    // file-system call when nothing is owed; lock/owed-releases.ts).
    if (!s) {
      return this.#locks.retryRelease(id).catch((err: unknown) => {
        throw isSessionPersistenceError(err) ? err : ioError(err, `close session '${id}'`, { sessionId: id })
      })
    }
    s.closing ??= (async () => {
      await s.ops.idle()
      try {
        // Nothing of this session writes any more: close the log and release the lock at once.
        // Both always run to the end; the first failure is reported as E_IO.
        const results = await Promise.allSettled([s.writer?.close(), s.lock?.release()])
        const failed = results.find((r) => r.status === 'rejected')
        if (failed) throw this.#wrap(failed.reason, `close session '${id}'`, s)
      } finally {
        if (this.#sessions.get(id) === s) this.#sessions.delete(id)
      }
    })()
    return s.closing
  }

  async delete(id: string, options?: DeleteOptions): Promise<void> {
    encodeSessionId(id)
    const condition = parseDeleteOptions(options, id)
    const s = this.#track(id, 'E_SESSION_LIVE')
    await this.#run(s, async () => {
      // As load: an id with no log is never locked.
      await findOneLog(this.#ctx, id)
      s.lock = await this.#locks.acquire(id)
      const path = await findOneLog(this.#ctx, id)
      // Read under the lock: no writer can touch the log between this check and the unlink.
      if (condition.ifLastWriteAtOrBefore !== undefined) {
        assertNotWrittenSince(condition, (await this.#ctx.fs.stat(path)).mtimeMs, { sessionId: id, path })
      }
      await this.#ctx.fs.unlink(path)
      await syncDir(this.#ctx, dirname(path))
    })
    await this.close(id)
  }

  async readRaw(id: string): Promise<RawSessionLog> {
    encodeSessionId(id)
    try {
      const path = await findOneLog(this.#ctx, id)
      // Read as inspect reads: committed damage is refused, a torn tail is left out, no closers.
      // One descriptor for the scan and the bytes: the header and lines are of one file.
      const bytes = await this.#withLog(path, async (handle) => {
        const { scan } = await this.#scan(id, path, handle, { closeOpenTurn: false })
        return readBytes(handle, path, 0, scan.validEnd)
      })
      return rawLogFromBytes(id, bytes)
    } catch (err) {
      throw this.#wrap(err, `read the raw log of session '${id}'`)
    }
  }

  async importRaw(log: RawSessionLog): Promise<void> {
    const { header, bytes } = rawLogToBytes(log)
    const { id } = header
    const path = logPath(this.#ctx.root, id, header.cwd)
    const s = this.#track(id, 'E_EXISTS')
    await this.#run(s, async () => {
      await this.#assertNoLog(id, path)
      s.lock = await this.#locks.acquire(id)
      // Published exactly as a first append publishes, re-checking every bucket under the lock.
      const handle = await materialize(this.#ctx, path, bytes, { sessionId: id, beforeLink: () => this.#assertNoLog(id, path) })
      await handle.close()
    })
    await this.close(id)
  }

  async openRawStream(id: string, options?: RawPageOptions): Promise<RawSessionStream> {
    encodeSessionId(id)
    try {
      const path = await findOneLog(this.#ctx, id)
      return await openJsonlRawStream(this.#ctx, id, path, () => this.#readableSize(id, path), options)
    } catch (err) {
      throw this.#wrap(err, `read the raw log of session '${id}'`)
    }
  }

  async importRawStream(log: RawSessionStream): Promise<{ eventLines: number }> {
    const header = checkRawHeaderLine(log?.id, log?.headerLine)
    const { id } = header
    const path = logPath(this.#ctx.root, id, header.cwd)
    const s = this.#track(id, 'E_EXISTS')
    let eventLines = 0
    await this.#run(s, async () => {
      await this.#assertNoLog(id, path)
      s.lock = await this.#locks.acquire(id)
      // Written under a temporary name page by page, then published as a first append publishes.
      const write = async (put: (piece: Buffer) => Promise<void>) => {
        eventLines = (await writeRawStream(log, put)).eventLines
      }
      const handle = await materialize(this.#ctx, path, write, { sessionId: id, beforeLink: () => this.#assertNoLog(id, path) })
      await handle.close()
    })
    await this.close(id)
    return { eventLines }
  }

  async migrate(id: string, options?: { dryRun?: boolean }): Promise<MigrateReport> {
    const { dryRun } = parseMaintenanceOptions(options, 'migrate')
    if (dryRun) {
      // Read as the migration would read it (verify's check), keeping no event: memory bounded on a
      // log of any size.
      try {
        // An event version 1 cannot hold refuses the dry run as it refuses the migration.
        // (A version-1 log is left alone: its lines are not judged for a migration.)
        const check = await checkLogIn(this.#ctx, id, { onEventLine: (buf, start, end, event, path, version) => version === 0 && assertMigratable(buf, start, end, event, id, path) })
        // A version-0 log is written with the closers of its repair; a version-1 one is left as it
        // is (the real run counts its events without closers, so does this).
        const closers = check.header.version === 0 ? (check.repair?.closers.length ?? 0) : 0
        const report: MigrateReport = { id, path: check.path, fromVersion: check.header.version, migrated: false, events: check.events + closers }
        if (check.repair) report.repair = { persisted: false, ...check.repair }
        return report
      } catch (err) {
        throw this.#wrap(err, `migrate session '${id}' (dry run)`)
      }
    }
    // Taken as `load` takes a session (E_SESSION_LIVE, E_LOCKED), then one pass that checks the
    // log as a load does and writes it sealed beside it; the old log is never touched, so a
    // crash leaves it whole (and a later load repairs it) or the new one whole.
    return this.#underLock(id, async (path) => {
      const handle = await this.#ctx.fs.open(path, 'r')
      try {
        const { header } = await readHeaderLine(handle, path, id)
        const report: MigrateReport = { id, path, fromVersion: header.version, migrated: header.version === 0, events: 0 }
        if (header.version === 1) {
          // Left as it is, but checked as its dry run checks it: a damaged one is refused
          // (E_CORRUPT), never reported "already version 1".
          report.events = (await checkLogIn(this.#ctx, id)).events
          return report
        }
        const lock = this.#sessions.get(id)!.lock!
        await rewriteLog(this.#ctx, path, migratedBody(handle, path, id, header, ({ events, repair }) => {
          report.events = events
          if (repair) report.repair = { persisted: true, ...repair }
        }), async () => await lock.assertHeld())
        return report
      } finally {
        await handle.close()
      }
    })
  }

  async redact(id: string, options: { pattern: RegExp | string; replacement?: string; dryRun?: boolean }): Promise<RedactReport> {
    const { pattern, replacement, dryRun } = parseRedactOptions(options)
    // One pass that checks the log as a load does (E_CORRUPT untouched), plans the repair of its
    // tail and counts the matches, keeping no event; only when something matched, a second pass
    // writes the redacted log beside it (its tail repaired there), renamed over it. The old log
    // is never written to, so a crash leaves it whole or the new one whole; memory is bounded
    // whatever the log's size. A dry run, or no match, writes nothing.
    const redactAt = async (path: string): Promise<RedactReport> => {
      const handle = await this.#ctx.fs.open(path, 'r')
      try {
        const plan = await planRedaction(handle, path, id, pattern, replacement)
        const report: RedactReport = { id, path, matches: plan.matches, seqs: plan.seqs, rewritten: false, ...(plan.cutMatches > 0 ? { cutMatches: plan.cutMatches } : {}) }
        // Its closers as the redaction writes them (never the matched text): a closer repeats a
        // pending call's id, which may hold a match.
        if (plan.repair) report.repair = { persisted: false, ...plan.repair, closers: plan.repair.closers.map((c) => redactEvent(c, pattern, replacement).event) }
        // Rewritten also when only the bytes its repair cuts hold a match: they are left behind otherwise.
        if (dryRun || plan.matches + plan.cutMatches === 0) return report
        const lock = this.#sessions.get(id)!.lock!
        await lock.assertHeld()
        const body = redactedBody(handle, plan, { path, pattern, replacement, now: Date.now(), done: (record) => (report.record = record) })
        // A lock lost while the new log was written must replace nothing.
        await rewriteLog(this.#ctx, path, body, async () => await lock.assertHeld())
        report.rewritten = true
        if (report.repair) report.repair.persisted = true
        return report
      } catch (err) {
        throw this.#wrap(err, `redact session '${id}'`)
      } finally {
        await handle.close()
      }
    }
    if (dryRun) {
      // Read without the lock, as the redaction would read it.
      encodeSessionId(id)
      return redactAt(await findOneLog(this.#ctx, id))
    }
    return this.#underLock(id, redactAt)
  }

  async truncateAtDamage(id: string, options?: { dryRun?: boolean }): Promise<TruncateReport> {
    const { dryRun } = parseMaintenanceOptions(options, 'truncateAtDamage')
    const cutAt = async (path: string) => {
      const handle = await this.#ctx.fs.open(path, 'r')
      try {
        const cut = await findDamage(handle, path, id)
        if (!cut) return { id, path }
        const size = (await handle.stat()).size
        const keptAt = keptAsideName(path)
        const plan = await truncatedBody(handle, path, id, cut, keptAt, Date.now(), size)
        const report: TruncateReport = { id, path, cut: plan.cut, keptAt, keptEvents: plan.kept, closers: plan.closers, record: plan.record }
        if (dryRun) return report
        // The whole log first, beside it and durable; then the cut log replaces it.
        const lock = this.#sessions.get(id)!.lock!
        await lock.assertHeld()
        await writeBeside(this.#ctx, path, (write) => copyRange(handle, path, 0, size, write), keptAt)
        await syncDir(this.#ctx, dirname(path))
        await rewriteLog(this.#ctx, path, plan.body, async () => await lock.assertHeld())
        return report
      } finally {
        await handle.close()
      }
    }
    if (dryRun) {
      encodeSessionId(id)
      try {
        return await cutAt(await findOneLog(this.#ctx, id))
      } catch (err) {
        throw this.#wrap(err, `repair session '${id}' (dry run)`)
      }
    }
    return this.#underLock(id, cutAt)
  }

  /** `job` with the session's lock held, taken as `load` takes it (E_SESSION_LIVE, E_LOCKED); released after. */
  async #underLock<T>(id: string, job: (path: string) => Promise<T>): Promise<T> {
    encodeSessionId(id)
    const s = this.#track(id, 'E_SESSION_LIVE')
    try {
      return await this.#run(s, async () => {
        await findOneLog(this.#ctx, id)
        s.lock = await this.#locks.acquire(id)
        return await job(await findOneLog(this.#ctx, id))
      })
    } finally {
      await this.close(id)
    }
  }

  async closeAll(): Promise<void> {
    // With the releases this process still owes in this root (a close or failed load whose
    // release failed earlier): closeAll leaves none of them behind if it resolves.
    const owed = this.#locks.retryReleases().catch((err: unknown) => Promise.reject(this.#wrap(err, 'closeAll: releasing a writer lock')))
    await Promise.all([...[...this.#sessions.keys()].map((id) => this.close(id)), owed])
  }

  /** Registers `id` synchronously, so a concurrent create/load/fork of it is refused with `code`. */
  #track(id: string, code: 'E_EXISTS' | 'E_SESSION_LIVE'): Tracked {
    if (this.#sessions.has(id)) throw alreadyTracked(id, code)
    const s = newTracked(id)
    this.#sessions.set(id, s)
    return s
  }

  /** Runs the opening job of a tracked session; on failure it is untracked and its lock released. */
  async #run<T>(s: Tracked, job: () => Promise<T>): Promise<T> {
    try {
      return await s.ops.run(job)
    } catch (err) {
      if (this.#sessions.get(s.id) === s) this.#sessions.delete(s.id)
      await s.lock?.release().catch(() => {})
      throw this.#wrap(err, `open session '${s.id}'`, s)
    }
  }

  /** `E_EXISTS` when a log of `id` is in any bucket; `path` is where this instance would publish it. */
  async #assertNoLog(id: string, path: string): Promise<void> {
    const existing = await findLogs(this.#ctx, id, path)
    if (existing.length > 0) {
      throw new SessionPersistenceError('E_EXISTS', `a log for session '${id}' already exists: ${existing[0]}`, {
        sessionId: id,
        path: existing[0],
      })
    }
  }

  #wrap(err: unknown, what: string, s?: Tracked): SessionPersistenceError {
    if (isSessionPersistenceError(err)) return err
    return ioError(err, what, { sessionId: s?.id, path: s?.path })
  }
}
