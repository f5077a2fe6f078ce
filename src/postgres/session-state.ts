import { encodeSessionId } from '../session/id-encoding.js'
import type { FormatVersion } from '../session/line-codec.js'
import { serializeEvents } from '../session/prepare-batch.js'
import { sameText } from './append-batch.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { SerialOps } from '../session/serial.js'
import { SessionPersistenceError } from '../errors.js'
import type { Batch } from './append-batch.js'
import { kindOf } from './event-kinds.js'

/** One session this instance writes (or is about to): created, loaded or forked here. */
export interface Tracked {
  readonly id: string
  readonly path: string
  readonly ops: SerialOps
  meta: SessionMeta | undefined
  headerLine: string | undefined
  /** The format version its lines are written in (§16): configured when created, its header's when loaded, its parent's when forked. */
  version: FormatVersion
  nextSeq: number
  /** Our writer token once we hold the session (its advisory lock is ours). */
  epoch: string | undefined
  /** True once the session has a row. */
  stored: boolean
  /** A batch whose COMMIT was never answered: resolved before anything else is written. */
  unknown: Batch | undefined
  /** The last batch acknowledged after being resolved: a retry of it is acknowledged again. */
  resolved: Batch | undefined
  closing: Promise<void> | undefined
}

/** A session nobody writes yet: tracked so that a concurrent create/load/fork of it is refused. */
export function newTracked(id: string, path: string): Tracked {
  return {
    id,
    path,
    ops: new SerialOps(),
    meta: undefined,
    headerLine: undefined,
    version: 0,
    nextSeq: 0,
    epoch: undefined,
    stored: false,
    unknown: undefined,
    resolved: undefined,
    closing: undefined,
  }
}

/** A batch serialized: `count` lines joined by `\n` in `text`, `bytes` long in a JSONL file, and their kinds. */
export type SerializedBatch = Pick<Batch, 'firstSeq' | 'count' | 'text' | 'bytes' | 'kinds'>

/**
 * Validates and serializes a batch as the JSONL backend does (the same lines in `version`,
 * sealed with their checksums in version 1, captured now). JSON.stringify escapes every newline
 * inside a value, so `\n` only ends lines.
 */
export function serializeBatch(id: string, events: readonly SessionEvent[], version: FormatVersion): SerializedBatch {
  const { firstSeq, count, lines, bytes } = serializeEvents(id, events, version)
  if (count === 0) return { firstSeq, count, text: '', bytes: 0, kinds: [] }
  // Checked by serializeEvents just now: every event has a string type.
  const kinds = events.map((e) => kindOf(e.type))
  return { firstSeq, count, text: lines, bytes, kinds }
}

/** The ids the JSONL backend accepts, minus NUL: PostgreSQL `text` cannot hold it. */
export function checkId(id: unknown): asserts id is string {
  encodeSessionId(id as string)
  if ((id as string).includes('\u0000')) {
    throw new SessionPersistenceError('E_INVALID_ID', 'session id holds a NUL character, which PostgreSQL text cannot store', {
      sessionId: id as string,
    })
  }
}

export function sameBatch(b: Batch, other: SerializedBatch): boolean {
  return b.firstSeq === other.firstSeq && b.count === other.count && sameText(b.text, other.text)
}

export function notWritable(id: string): SessionPersistenceError {
  if (typeof id !== 'string') return new SessionPersistenceError('E_INVALID_ID', `session id must be a non-empty string, got ${typeof id}`)
  return new SessionPersistenceError(
    'E_NOT_FOUND',
    `session '${id}' is not open for appends in this instance (create, load or fork it first)`,
    { sessionId: id },
  )
}
