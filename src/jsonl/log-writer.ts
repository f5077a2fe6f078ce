import { SessionPersistenceError, ioError } from '../errors.js'
import type { FileHandle } from './fs/file-system.js'
import { dirname } from 'node:path'
import { ensureDir, syncDir, syncFile, syncWritten, writeAll } from './durable.js'
import type { StoreContext } from './store-context.js'

/**
 * The open end of one materialized log: its handle, its acknowledged length and next seq.
 * Appends are one positional write at the acknowledged end plus one sync (docs/contract.md §5.2).
 */
export class LogWriter {
  readonly #ctx: StoreContext
  readonly path: string
  readonly sessionId: string
  readonly #handle: FileHandle
  /** Bytes acknowledged durable: the rollback point of the next append. */
  size: number
  #broken: SessionPersistenceError | undefined
  /**
   * Whether the log's name is known durable: this instance published it (and synced its bucket),
   * or an append made sure. A log found by a load may have been linked or renamed by a process
   * that died before it synced the bucket: appends acknowledged into it would go with its name
   * in a power cut. Its first append syncs the bucket (and the bucket's own entry) first.
   */
  #nameDurable: boolean

  constructor(ctx: StoreContext, sessionId: string, path: string, handle: FileHandle, size: number, nameDurable = true) {
    this.#ctx = ctx
    this.sessionId = sessionId
    this.path = path
    this.#handle = handle
    this.size = size
    this.#nameDurable = nameDurable
  }

  get broken(): SessionPersistenceError | undefined {
    return this.#broken
  }

  /**
   * Writes `bytes` at the acknowledged end and syncs. On failure the
   * file is cut back to the acknowledged length and synced, and the call rejects with `E_IO`;
   * if even that fails the writer is broken (`E_WRITER_BROKEN` for every later append).
   */
  async append(bytes: Buffer): Promise<void> {
    if (this.#broken) throw this.#broken
    if (!this.#nameDurable) {
      try {
        await ensureDir(this.#ctx, dirname(this.path))
        await syncDir(this.#ctx, dirname(this.path))
      } catch (err) {
        throw ioError(err, `sync the bucket of ${this.path}`, { sessionId: this.sessionId, path: this.path })
      }
      this.#nameDurable = true
    }
    const before = this.size
    try {
      // With O_DSYNC the write is its own data sync, and a failed write counts as a failed sync.
      await writeAll(this.#handle, bytes, before)
      await syncWritten(this.#ctx, this.#handle)
    } catch (err) {
      await this.#rollback(before, err)
      throw ioError(err, `append to ${this.path}`, { sessionId: this.sessionId, path: this.path })
    }
    this.size = before + bytes.length
  }

  /** Cuts the file at `length` and syncs (a load's repair of a torn tail). */
  async truncate(length: number): Promise<void> {
    try {
      await this.#handle.truncate(length)
      await syncFile(this.#ctx, this.#handle)
    } catch (err) {
      throw ioError(err, `truncate ${this.path}`, { sessionId: this.sessionId, path: this.path })
    }
    this.size = length
  }

  async #rollback(length: number, cause: unknown): Promise<void> {
    try {
      await this.#handle.truncate(length)
      await syncFile(this.#ctx, this.#handle)
    } catch (rollbackError) {
      this.#broken = new SessionPersistenceError(
        'E_WRITER_BROKEN',
        `a failed append to ${this.path} could not be rolled back; close and load the session again`,
        { sessionId: this.sessionId, path: this.path, cause: new AggregateError([cause, rollbackError]) },
      )
    }
  }

  close(): Promise<void> {
    return this.#handle.close()
  }
}
