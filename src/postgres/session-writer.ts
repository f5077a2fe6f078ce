import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { appendBatch, type Batch, OutcomeUnknown, storedState } from './append-batch.js'
import type { ResolvedPostgresConfig } from './config.js'
import { type Db, dbError, retrying } from './db.js'
import { GroupCommit } from './group-commit.js'
import { type LockConnection, sessionKey } from './lock-connection.js'
import { notWritable, sameBatch, type SerializedBatch, type Tracked } from './session-state.js'
import { lockedBy, nextEpoch } from './session-row.js'

/**
 * The write path of a PostgreSQL store: takes a session (its advisory lock and a fresh writer
 * token) when it is first written, sends each batch through the fenced statement (shared with
 * other sessions' batches, group-commit.ts), and finds out what became of a batch whose COMMIT
 * went unanswered before the session writes again.
 */
export class SessionWriter {
  readonly #c: ResolvedPostgresConfig
  readonly #db: Db
  readonly #lock: LockConnection
  readonly #group: GroupCommit

  constructor(c: ResolvedPostgresConfig, db: Db, lock: LockConnection) {
    this.#c = c
    this.#db = db
    this.#lock = lock
    this.#group = new GroupCommit(db, c.schema, c.appendStatements)
  }

  /** Appends the next batch of an open session (its row created with it when it is the first). */
  async append(s: Tracked, serialized: SerializedBatch): Promise<void> {
    if (!s.headerLine || !s.meta) throw notWritable(s.id)
    if (s.unknown) await this.#resolveUnknown(s)
    if (s.resolved && sameBatch(s.resolved, serialized)) return // a retry of a batch found stored
    const { firstSeq } = serialized
    if (firstSeq !== s.nextSeq) {
      throw new SessionPersistenceError(
        'E_SEQ_NOT_CONTIGUOUS',
        `session '${s.id}': the batch starts at seq ${firstSeq}, the log continues at ${s.nextSeq}`,
        { sessionId: s.id, path: s.path },
      )
    }
    if (!this.#lock.healthy) void this.#lock.reacquire().catch(() => {})
    await this.ensureHeld(s).catch((err: unknown) => {
      throw dbError(err, `take session '${s.id}'`, s.id)
    })
    const batch: Batch = { sessionId: s.id, epoch: s.epoch!, ...serialized }
    if (!s.stored) batch.create = { headerLine: s.headerLine, createdAt: s.meta.createdAt, host: this.#c.host }
    try {
      await this.write(s, batch)
    } catch (err) {
      // A first batch refused because the session is stored (another instance created it since
      // `create`) writes nothing and never will: the lock goes, so that its owner can resume it.
      if (batch.create && isSessionPersistenceError(err) && err.code === 'E_EXISTS' && s.epoch !== undefined) await this.#letGo(s)
      throw err
    }
  }

  /** Releases the session's advisory lock and forgets its writer token (a later append takes both again). */
  async #letGo(s: Tracked): Promise<void> {
    s.epoch = undefined
    await this.#lock.unlock(sessionKey(this.#c.schema, s.id)).catch(() => {})
  }

  async write(s: Tracked, batch: Batch, ambiguous = false): Promise<void> {
    s.resolved = undefined
    try {
      await appendBatch(this.#db, this.#group, this.#c.schema, batch, {
        deadline: Date.now() + this.#c.retryTimeoutMs,
        path: s.path,
        ambiguous,
      })
    } catch (err) {
      if (err instanceof OutcomeUnknown) s.unknown = batch
      throw dbError(err, `append to session '${s.id}'`, s.id)
    }
    s.stored = true
    s.nextSeq = batch.firstSeq + batch.count
  }

  /** Finds out whether the unanswered batch was stored, and moves on from there. */
  async #resolveUnknown(s: Tracked): Promise<void> {
    const batch = s.unknown!
    let state
    try {
      state = await storedState(this.#db, this.#c.schema, batch, s.path)
    } catch (err) {
      throw dbError(err, `resolve the last batch of session '${s.id}'`, s.id)
    }
    s.unknown = undefined
    if (state === 'stored') {
      s.stored = true
      s.nextSeq = batch.firstSeq + batch.count
      s.resolved = batch
    }
  }

  /** Takes the session's advisory lock and a fresh writer token, unless we hold it already. */
  async ensureHeld(s: Tracked): Promise<void> {
    if (s.epoch !== undefined) return
    // Both are safe to repeat: a lock taken on a connection that then died went with it.
    const deadline = Date.now() + this.#c.retryTimeoutMs
    const [locked, epoch] = await Promise.allSettled([
      retrying(deadline, () => this.#lock.tryLock(sessionKey(this.#c.schema, s.id))),
      retrying(deadline, () => nextEpoch(this.#db, this.#c.schema)),
    ])
    if (locked.status === 'rejected') throw locked.reason
    if (!locked.value) throw await lockedBy(this.#db, this.#c.schema, s.id, s.path)
    if (epoch.status === 'rejected') {
      await this.#lock.unlock(sessionKey(this.#c.schema, s.id)) // all or nothing: never a lock without its token
      throw epoch.reason
    }
    s.epoch = epoch.value
  }
}
