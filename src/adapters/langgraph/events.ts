import type { JsonValue, SessionEvent } from '../../index.js'
import { SessionPersistenceError } from '../../errors.js'
import { isTyped, type Typed } from './typed.js'

/** The event types the saver writes (besides the `turn/start` and `turn/end` around each append). */
export const CHECKPOINT_EVENT = 'langgraph/checkpoint'
export const WRITES_EVENT = 'langgraph/writes'

export type ChannelVersion = number | string

/** One channel value a checkpoint stored; no `value` means the channel was empty at that version. */
export interface StoredValue {
  channel: string
  version: ChannelVersion
  value?: Typed
}

/** `langgraph/checkpoint`'s data: a `put`. */
export interface CheckpointRecord {
  ns: string
  id: string
  parent?: string
  /** The checkpoint without `channel_values`, as the serializer's JSON. */
  checkpoint: Record<string, unknown>
  metadata: Record<string, unknown>
  /** The values of the channels `newVersions` named, at those versions. */
  values: StoredValue[]
}

export interface StoredWrite {
  /** The write's index in its batch, or LangGraph's fixed negative index for a special channel. */
  idx: number
  channel: string
  value: Typed
}

/** `langgraph/writes`' data: a `putWrites`, minus the writes it would not change. */
export interface WritesRecord {
  ns: string
  checkpoint: string
  task: string
  path?: string
  writes: StoredWrite[]
}

/** An event without its seq and time, which the writer assigns. */
export interface Draft {
  type: string
  data: JsonValue
}

/**
 * One append is one turn: each ends with a `turn/end`, the package's commit point, so damage
 * before it is refused as corruption instead of cut as a torn tail, and a batch a crash tore is
 * closed by repair like any interrupted turn.
 */
export const openTurn = (turn: number): Draft => ({ type: 'turn/start', data: { turn } })
export const closeTurn = (turn: number): Draft => ({ type: 'turn/end', data: { turn, reason: { kind: 'completed' } } })

export function checkpointDraft(r: CheckpointRecord): Draft {
  return { type: CHECKPOINT_EVENT, data: r as unknown as JsonValue }
}

export function writesDraft(r: WritesRecord): Draft {
  return { type: WRITES_EVENT, data: r as unknown as JsonValue }
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const isVersion = (v: unknown): v is ChannelVersion => (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'string'

function isStoredValue(v: unknown): v is StoredValue {
  return isObj(v) && typeof v.channel === 'string' && isVersion(v.version) && (v.value === undefined || isTyped(v.value))
}

function isStoredWrite(w: unknown): w is StoredWrite {
  return isObj(w) && Number.isSafeInteger(w.idx) && typeof w.channel === 'string' && isTyped(w.value)
}

function bad(e: SessionEvent, sessionId: string, why: string): SessionPersistenceError {
  return new SessionPersistenceError('E_CORRUPT', `event '${e.type}' (seq ${e.seq}) of ${sessionId}: ${why}`, { sessionId })
}

/** The record of a `langgraph/checkpoint` event, checked field by field (a hand check: it runs on every line of a thread's log). */
export function parseCheckpoint(e: SessionEvent, sessionId: string): CheckpointRecord {
  const d = e.data
  if (!isObj(d)) throw bad(e, sessionId, 'data is not an object')
  const { ns, id, parent, checkpoint, metadata, values } = d
  if (typeof ns !== 'string' || typeof id !== 'string' || id === '') throw bad(e, sessionId, 'ns or id is missing')
  if (parent !== undefined && typeof parent !== 'string') throw bad(e, sessionId, 'parent is not a string')
  if (!isObj(checkpoint) || !isObj(metadata)) throw bad(e, sessionId, 'checkpoint or metadata is not an object')
  if (!Array.isArray(values)) throw bad(e, sessionId, 'values is not an array')
  const stored: StoredValue[] = []
  for (const v of values) {
    if (!isStoredValue(v)) throw bad(e, sessionId, 'a stored value is malformed')
    stored.push(v)
  }
  return {
    ns,
    id,
    ...(parent === undefined ? {} : { parent }),
    checkpoint,
    metadata,
    values: stored,
  }
}

export function parseWrites(e: SessionEvent, sessionId: string): WritesRecord {
  const d = e.data
  if (!isObj(d)) throw bad(e, sessionId, 'data is not an object')
  const { ns, checkpoint, task, path, writes } = d
  if (typeof ns !== 'string' || typeof checkpoint !== 'string' || typeof task !== 'string') throw bad(e, sessionId, 'ns, checkpoint or task is missing')
  if (path !== undefined && typeof path !== 'string') throw bad(e, sessionId, 'path is not a string')
  if (!Array.isArray(writes)) throw bad(e, sessionId, 'writes is not an array')
  const stored: StoredWrite[] = []
  for (const w of writes) {
    if (!isStoredWrite(w)) throw bad(e, sessionId, 'a write is malformed')
    stored.push(w)
  }
  return { ns, checkpoint, task, ...(path === undefined ? {} : { path }), writes: stored }
}

/** The turn number a `turn/start` opens, if it is one. */
export function turnOf(e: SessionEvent): number | undefined {
  if (e.type !== 'turn/start' || !isObj(e.data)) return undefined
  const t = e.data.turn
  return typeof t === 'number' && Number.isSafeInteger(t) ? t : undefined
}
