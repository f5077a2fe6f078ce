import { sep } from 'node:path'
import { isSessionPersistenceError } from '../errors.js'
import type { ListProblem } from '../persistence.js'
import { decodeSessionId } from '../session/id-encoding.js'
import { notRegularFile } from './errno.js'
import { LOG_SUFFIX } from './paths.js'
import type { StoreContext } from './store-context.js'

/** A log a listing found in a bucket: its path, the id its name encodes, and once `stat`ed its size and mtime. */
export interface ListedFile {
  path: string
  id: string
  size: number | undefined
  mtimeMs: number | undefined
}

/**
 * The logs of a root's buckets as a listing finds them, bucket by bucket: `files` grows as each
 * bucket's directory is read, so that the logs found first can be read while the rest are looked
 * for (a listing of 100,000 logs spent about 100 ms reading the directories before it read a
 * header). A bucket that cannot be read, a name that encodes no id and an entry that is no
 * regular file are reported as they are met, never fatal; temporary files are skipped.
 */
export class FoundLogs {
  readonly files: ListedFile[] = []
  readonly #ctx: StoreContext
  readonly #buckets: readonly string[]
  readonly #onProblem: (problem: ListProblem) => void
  #read = 0
  #rest: Promise<void> | undefined
  #complete = false
  #failure: { error: unknown } | undefined
  #waiting: (() => void)[] = []
  #stopped = false

  constructor(ctx: StoreContext, buckets: readonly string[], onProblem: (problem: ListProblem) => void) {
    this.#ctx = ctx
    this.#buckets = buckets
    this.#onProblem = onProblem
    this.#complete = buckets.length === 0
  }

  /** Whether every bucket has been read (`files` is then all there is). */
  get complete(): boolean {
    return this.#complete
  }

  /** About how many logs there are: as many a bucket still to read as in those read. */
  get expected(): number {
    return this.#read === 0 ? this.files.length : Math.round((this.files.length / this.#read) * this.#buckets.length)
  }

  /** Reads buckets until `count` logs are found or every bucket is read. Only before `finish`. */
  async readUntil(count: number): Promise<void> {
    while (!this.#rest && this.#read < this.#buckets.length && this.files.length < count) await this.#readBucket(this.#buckets[this.#read++]!)
    if (this.#read === this.#buckets.length) this.#complete = true
  }

  /** Reads the buckets not read yet (once; later calls wait for the same reads). */
  finish(): Promise<void> {
    this.#rest ??= (async () => {
      try {
        while (this.#read < this.#buckets.length && !this.#stopped) {
          await this.#readBucket(this.#buckets[this.#read++]!)
          this.#wake()
        }
      } catch (error) {
        this.#failure = { error }
        throw error
      } finally {
        this.#complete = true
        this.#wake()
      }
    })()
    return this.#rest
  }

  /** Reads no more buckets and reports nothing more (a listing that failed). */
  stop(): void {
    this.#stopped = true
  }

  /** The paths of the logs found so far, then of each bucket's as it is read (reading them). */
  async *paths(): AsyncGenerator<readonly string[]> {
    void this.finish().catch(() => undefined) // its failure is thrown below
    for (let at = 0; ; ) {
      if (at < this.files.length) {
        const chunk = new Array<string>(this.files.length - at)
        for (let i = 0; i < chunk.length; i++) chunk[i] = this.files[at + i]!.path
        at += chunk.length
        yield chunk
        continue
      }
      if (this.#failure) throw this.#failure.error
      if (this.#complete) return
      await new Promise<void>((resolve) => this.#waiting.push(resolve))
    }
  }

  #wake(): void {
    for (const resolve of this.#waiting.splice(0)) resolve()
  }

  async #readBucket(bucket: string): Promise<void> {
    let entries
    try {
      entries = await this.#ctx.fs.readdir(bucket)
    } catch (err) {
      if (!this.#stopped) this.#report(bucket, err)
      return
    }
    if (this.#stopped) return // the listing failed while this bucket was read: nothing more is reported
    for (const entry of entries) {
      if (entry.name.startsWith('.') || !entry.name.endsWith(LOG_SUFFIX)) continue
      // Joined and cut by hand: `join` normalizes and `basename` scans, 100,000 times a listing.
      const path = bucket + sep + entry.name
      const id = decodeSessionId(entry.name.slice(0, -LOG_SUFFIX.length))
      if (id === undefined) {
        this.#onProblem({ path, code: 'E_CORRUPT', message: `${path}: the file name is not an encoded session id` })
        continue
      }
      // A FIFO, socket or device named like a log is no log (`load` does not find it either):
      // reported, never opened (an open of a FIFO may wait for a writer). A directory is read
      // and reported as the read fails (EISDIR), as it always was.
      if (!entry.isFile && !entry.isDirectory && entry.isSymbolicLink === false) {
        this.#report(path, notRegularFile(path, entry))
        continue
      }
      this.files.push({ path, id, size: undefined, mtimeMs: undefined })
    }
  }

  #report(path: string, err: unknown): void {
    reportProblem(this.#onProblem, path, err)
  }
}

/** A listing's problem for `path`: the error's code when it is the package's, else `E_IO`. */
export function reportProblem(onProblem: (problem: ListProblem) => void, path: string, err: unknown): void {
  onProblem({ path, code: isSessionPersistenceError(err) ? err.code : 'E_IO', message: err instanceof Error ? err.message : String(err) })
}
