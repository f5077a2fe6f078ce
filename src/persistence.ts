import type { RepairReport } from './jsonl/repair-plan.js'
import type { SessionEvent, SessionMeta } from './session/schema.js'

export type { RepairReport } from './jsonl/repair-plan.js'

/** Where a session's log lives: a file under a JSONL root, or rows in a PostgreSQL schema. */
export type SessionLocation = JsonlLocation | PostgresLocation
export interface JsonlLocation {
  kind: 'jsonl'
  /** Absolute path of the log file (it may not exist yet). */
  path: string
}
export interface PostgresLocation {
  kind: 'postgres'
  schema: string
  id: string
}

/** What `load` and `inspect` return. */
export interface LoadedSession {
  meta: SessionMeta
  /** `events[i].seq === firstSeq + i`. */
  events: readonly SessionEvent[]
  /** The seq of `events[0]`: 0 for a load from the start, later for a load from the last compaction (§15.1). */
  firstSeq: number
  /** Present when the tail needed repair (a torn tail cut, or an open final turn closed). */
  repair?: RepairReport
}

/** What `read` returns (§15.2): a slice of the stored events, and how many valid ones are stored. */
export interface SessionRange {
  meta: SessionMeta
  /** `events[i].seq === firstSeq + i`. */
  events: readonly SessionEvent[]
  /** The seq of `events[0]` (where the range starts, clamped to `length`). */
  firstSeq: number
  /** The number of valid events stored (a torn tail not counted; no closers added). */
  length: number
}

/**
 * Which events `read` returns: `fromSeq <= seq < toSeq` (defaults 0 and the end), or the last
 * `last` events. `last` cannot be combined with `fromSeq`/`toSeq` (`E_CONFIG`).
 */
export interface ReadRange {
  fromSeq?: number
  toSeq?: number
  last?: number
}

export interface WatchOptions {
  /** The first seq to yield (default 0). */
  fromSeq?: number
  /** Ends the iteration (without an error) when it aborts. */
  signal?: AbortSignal
}

export interface SessionListing {
  meta: SessionMeta
  location: SessionLocation
  sizeBytes: number
  mtimeMs: number
}

export interface ListProblem {
  path: string
  code: string
  message: string
}

export interface LoadOptions {
  /** Default true. False adopts a session still live in a host: an open final turn stays open. */
  closeOpenTurn?: boolean
  /**
   * `'start'` (default) reads the whole log. `'last-compaction'` reads only from the earliest of
   * the compaction in force's `firstKeptSeq`, the last `request/header` and an open turn's start
   * (§15.1): same repair, same lock, appends continue at `firstSeq + events.length`.
   */
  from?: 'start' | 'last-compaction'
}

export interface DeleteOptions {
  /**
   * Delete only if the log's last write is at or before this time (epoch ms, as
   * `SessionListing.mtimeMs`); otherwise reject with `E_SESSION_LIVE`, writing nothing. Checked
   * under the session's lock, so a session written after it was listed is never deleted.
   */
  ifLastWriteAtOrBefore?: number
}

export interface ListOptions {
  onProblem?: (problem: ListProblem) => void
  /** `'createdAt'` (default: newest first, then id) or `'lastWrite'` (newest `mtimeMs` first, then id). */
  orderBy?: 'createdAt' | 'lastWrite'
  /** At most this many listings (a non-negative integer); with `lastWrite`, at most this many headers are read (§15.4). */
  limit?: number
}

/**
 * The seam between a host's write path and a storage backend (docs/contract.md §4). The plugin depends on
 * this interface only; the JSONL backend and the in-memory reference both implement it.
 */
export interface SessionPersistence {
  locate(meta: SessionMeta): SessionLocation
  create(meta: SessionMeta): Promise<void>
  append(id: string, events: readonly SessionEvent[]): Promise<void>
  load(id: string, options?: LoadOptions): Promise<LoadedSession>
  inspect(id: string): Promise<LoadedSession>
  list(options?: ListOptions): Promise<SessionListing[]>
  /**
   * A slice of a stored session, read-only like `inspect` (no lock, any session, including one
   * being written): its start is found by bisecting on seq, never by reading what comes before.
   * A torn tail is not returned; damage inside the range rejects as `load` would (§15.2).
   */
  read(id: string, range?: ReadRange): Promise<SessionRange>
  /**
   * Every event with `seq >= fromSeq`, in order: those stored, then each new one soon after any
   * instance or process appends it; complete valid lines only, never one twice, the closers after
   * a repair. Waits for a session that does not exist yet; ends when it is deleted or `signal`
   * aborts. Takes no lock (§15.3).
   */
  watch(id: string, options?: WatchOptions): AsyncIterable<SessionEvent>
  /**
   * Removes a session's log durably. `E_NOT_FOUND` when there is none, `E_SESSION_LIVE` when
   * this instance has it open, `E_LOCKED` when another instance holds its lock. Forks of it keep
   * their copied seed. With `ifLastWriteAtOrBefore`, `E_SESSION_LIVE` also when the log was
   * written after that time (see `DeleteOptions`); nothing is deleted then.
   */
  delete(id: string, options?: DeleteOptions): Promise<void>
  close(id: string): Promise<void>
}

/**
 * The exact lines of a stored session, without their trailing `\n`: the header line, then one
 * line per valid event in seq order (as `inspect` reads them: a torn tail is not included and no
 * closers are added). What `session-jsonl copy` moves between backends byte for byte.
 */
export interface RawSessionLog {
  id: string
  headerLine: string
  eventLines: string[]
}

/** Backends that can hand out and take in a session's exact lines (both built-in ones do). */
export interface RawLogTransfer {
  /** The stored lines of `id`, read without any lock (`E_NOT_FOUND`, `E_CORRUPT` as `inspect`). */
  readRaw(id: string): Promise<RawSessionLog>
  /**
   * Stores a session from its exact lines, durably, under its lock; `E_EXISTS` when the id is
   * already stored. The header line's id must equal `log.id`. Nothing is stored on failure.
   */
  importRaw(log: RawSessionLog): Promise<void>
}

/** A stored session's exact lines, handed out page by page (§15.5). */
export interface RawSessionStream {
  readonly id: string
  /** The header line, without its `\n`. */
  readonly headerLine: string
  /**
   * The valid event lines in seq order, without `\n`, in pages of at most `pageLines` lines and
   * about `pageBytes` bytes (a longer line is a page of its own). It can be iterated once
   * (again: `E_CONFIG`); it ends at the last valid line stored when the iteration started (a torn
   * tail is left out, no closers are added) and rejects (`E_CORRUPT` with line and byte) at
   * damage, and `E_NOT_FOUND` when the session was deleted, created again or rewritten since the
   * stream was opened. It holds no file
   * or connection until iterated, and releases it when the iteration ends or is abandoned.
   */
  readonly eventPages: AsyncIterable<readonly string[]>
}

export interface RawPageOptions {
  pageLines?: number
  pageBytes?: number
}

/** The streaming counterpart of `RawLogTransfer`: `copy` of a log of any size in bounded memory. */
export interface RawLogStreaming {
  /**
   * Opens `id` without a lock: resolves once the header is read and checked (`E_NOT_FOUND`,
   * `E_CORRUPT`, `E_FORMAT_UNSUPPORTED` as `readRaw`), before any event line is read.
   */
  openRawStream(id: string, options?: RawPageOptions): Promise<RawSessionStream>
  /**
   * `importRaw` page by page, holding one page at a time: each line is checked as `importRaw`
   * checks it, the lines are written where no reader sees them, and the session appears,
   * durably and under its lock, only when the last page is in (`E_EXISTS` if the id is stored
   * by then). A rejection of `eventPages` or any failure stores nothing and leaves nothing
   * behind. Resolves with the number of event lines stored.
   */
  importRawStream(log: RawSessionStream): Promise<{ eventLines: number }>
}

export interface ForkChild {
  id: string
  seedLength: number
  createdAt?: number
  cwd?: string
}

/** A full backend: the seam plus fork, closeAll and raw-log transfer (JSONL and PostgreSQL). */
export interface SessionStore extends SessionPersistence, RawLogTransfer, Partial<RawLogStreaming> {
  fork(parentId: string, child: ForkChild): Promise<SessionMeta>
  closeAll(): Promise<void>
}

/** What `migrate` did or, with `dryRun`, would do (§16). */
export interface MigrateReport {
  id: string
  path: string
  /** The log's version before; `migrated` is false when it was already 1. */
  fromVersion: 0 | 1
  migrated: boolean
  events: number
  /** The repair the load before the rewrite made (or would make), if any. */
  repair?: RepairReport
}

/** What `redact` did or, with `dryRun`, would do (§16): never the matched text. */
export interface RedactReport {
  id: string
  path: string
  matches: number
  /** The seqs of the events that held a match. */
  seqs: number[]
  /**
   * Matches in the bytes the log's repair cuts (a torn tail; zeroed blocks and what follows
   * them): no event holds them, so they are not in `matches`; when there are any, the log is
   * rewritten without those bytes, as a load would cut them. Absent when there are none.
   */
  cutMatches?: number
  /** False when nothing matched (nothing is written then) or on a dry run. */
  rewritten: boolean
  /** The `log/redacted` event appended. */
  record?: SessionEvent
  /**
   * The repair of the log's tail (a torn line cut, an open turn closed): made in the rewritten
   * log (`persisted`), or, on a dry run or when nothing matched, what the next load will make.
   */
  repair?: RepairReport
}

/** What `truncateAtDamage` did or, with `dryRun`, would do (§16). */
export interface TruncateReport {
  id: string
  path: string
  /** Undefined when the log holds no damage (nothing is cut then). */
  cut?: { line: number; byteOffset: number; reason: string }
  /** Where the whole damaged log was kept, beside the log (never listed, never loaded). */
  keptAt?: string
  /** Events kept before the cut, the closers written, and the `log/truncated` event. */
  keptEvents?: number
  closers?: readonly SessionEvent[]
  record?: SessionEvent
}

export interface JsonlSessionPersistence extends Omit<SessionStore, keyof RawLogStreaming>, RawLogStreaming {
  /** The resolved absolute root. */
  readonly root: string
  locate(meta: SessionMeta): JsonlLocation
  /**
   * Rewrites a version-0 log as version 1 under its lock (§16): the tail repaired first, a
   * temporary file written and synced, renamed over the log, the bucket synced. `E_LOCKED` or
   * `E_SESSION_LIVE` for a session being written, `E_CORRUPT` (untouched) for a damaged one.
   */
  migrate(id: string, options?: { dryRun?: boolean }): Promise<MigrateReport>
  /**
   * Replaces every match of `pattern` in the string values of a closed session's events (never
   * keys or structure; default replacement `[REDACTED]`) by the protocol of `migrate`, and
   * appends an ignorable `log/redacted` event (§16).
   */
  redact(id: string, options: { pattern: RegExp | string; replacement?: string; dryRun?: boolean }): Promise<RedactReport>
  /**
   * The operator's way out of `E_CORRUPT` (§16): keeps the whole log aside beside it, cuts the
   * log at its first damaged line, closes an open turn as `load` does and appends an ignorable
   * `log/truncated` event. The only operation that ever cuts committed history.
   */
  truncateAtDamage(id: string, options?: { dryRun?: boolean }): Promise<TruncateReport>
}
