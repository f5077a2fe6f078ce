import { isDeepStrictEqual } from 'node:util'
import {
  type BaseCheckpointSaver,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  compareWritesSortKeys,
  maxChannelVersion,
  type SerializerProtocol,
  TASKS,
  writesSortKey,
} from '@langchain/langgraph-checkpoint'
import { type IndexedCheckpoint, type IndexedWrite, type NamespaceIndex, typedOf } from './thread-index.js'
import { loadTyped, type Typed } from './typed.js'
import { threadSessionId } from './thread-id.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'

/** Everything a tuple needs, gathered from the index; deserialized later, outside the thread's queue. */
export interface TuplePlan {
  threadId: string
  record: IndexedCheckpoint
  values: [channel: string, value: Typed][]
  writes: IndexedWrite[]
  /** For a checkpoint of format < 4: the sends its parent's tasks wrote, which become its `__pregel_tasks` value. */
  sends: Typed[] | undefined
}

/** A checkpoint's writes in the order live execution applies them: (task path, task id, index). */
export function ordered(writes: readonly IndexedWrite[]): IndexedWrite[] {
  return writes
    .map((w) => ({ w, key: writesSortKey(w.path, w.task, w.idx) }))
    .sort((a, b) => compareWritesSortKeys(a.key, b.key))
    .map(({ w }) => w)
}

export function planTuple(threadId: string, ns: NamespaceIndex, record: IndexedCheckpoint): TuplePlan {
  const values: [string, Typed][] = []
  for (const [channel, version] of Object.entries(record.versions)) {
    const value = ns.valueAt(record, channel, version)?.value
    if (value !== undefined) values.push([channel, typedOf(value)])
  }
  const v = record.v
  const sends =
    typeof v === 'number' && v < 4 && record.parent !== undefined
      ? ordered(ns.writesOf(record.parent))
          .filter((w) => w.channel === TASKS)
          .map((w) => typedOf(w.value))
      : undefined
  return { threadId, record, values, writes: ordered(ns.writesOf(record.id)), sends }
}

/**
 * A stored value the serializer cannot read back (the empty JSON earlier builds stored for a
 * function, say): the log is damaged for it, `E_CORRUPT` naming the thread. A
 * SessionPersistenceError the serializer threw is kept as it is.
 */
export function unreadable(threadId: string, where: string, cause: unknown): SessionPersistenceError {
  if (isSessionPersistenceError(cause)) return cause
  let why: string
  try {
    why = cause instanceof Error ? cause.message : String(cause)
  } catch {
    why = 'it threw a value that cannot be shown'
  }
  return new SessionPersistenceError(
    'E_CORRUPT',
    `${where} of LangGraph thread ${JSON.stringify(threadId)} holds a value the serializer cannot read back: ${why}`,
    { sessionId: threadSessionId(threadId), cause },
  )
}

export async function buildTuple(serde: SerializerProtocol, plan: TuplePlan, saver: BaseCheckpointSaver): Promise<CheckpointTuple> {
  const { record, threadId } = plan
  const json = (text: string): Typed => ({ type: 'json', text })
  let loaded: [Checkpoint, CheckpointMetadata, (readonly [string, unknown])[], CheckpointPendingWrite[], unknown[] | undefined]
  try {
    loaded = await Promise.all([
      loadTyped(serde, json(record.core)) as Promise<Checkpoint>,
      loadTyped(serde, json(record.metadata)) as Promise<CheckpointMetadata>,
      Promise.all(plan.values.map(async ([channel, value]) => [channel, await loadTyped(serde, value)] as const)),
      Promise.all(plan.writes.map(async (w): Promise<CheckpointPendingWrite> => [w.task, w.channel, await loadTyped(serde, typedOf(w.value))])),
      plan.sends && Promise.all(plan.sends.map((s) => loadTyped(serde, s))),
    ])
  } catch (cause) {
    throw unreadable(threadId, `checkpoint ${record.id}`, cause)
  }
  const [checkpoint, metadata, values, pendingWrites, sends] = loaded
  if (typeof checkpoint !== 'object' || checkpoint === null || Array.isArray(checkpoint)) {
    // Stored as an object; read back as something else (the serializer revives {lc: 2, type: 'undefined'} as undefined): damage.
    throw unreadable(threadId, `checkpoint ${record.id}`, new Error(`the checkpoint reads back as ${Array.isArray(checkpoint) ? 'an array' : String(checkpoint)}, not an object`))
  }
  checkpoint.channel_values = Object.fromEntries(values)
  checkpoint.channel_versions ??= {}
  if (sends) {
    // What LangGraph's savers do for checkpoints written before format 4 kept sends in the parent's writes.
    const versions = Object.values(checkpoint.channel_versions)
    checkpoint.channel_values[TASKS] = sends
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : saver.getNextVersion(undefined)
  }
  const configurable = { thread_id: threadId, checkpoint_ns: record.ns }
  return {
    config: { configurable: { ...configurable, checkpoint_id: record.id } },
    checkpoint,
    metadata,
    pendingWrites,
    ...(record.parent === undefined ? {} : { parentConfig: { configurable: { ...configurable, checkpoint_id: record.parent } } }),
  }
}

/** `list`'s filter: every field given equals the stored metadata's (deep equality for objects). */
export function matchesFilter(metadataText: string, filter: Record<string, unknown>): boolean {
  const entries = Object.entries(filter)
  if (entries.length === 0) return true
  const metadata = JSON.parse(metadataText) as Record<string, unknown>
  for (const [key, value] of entries) {
    const stored = Object.hasOwn(metadata, key) ? metadata[key] : undefined
    if (stored === value) continue
    if (typeof value !== 'object' || value === null || !isDeepStrictEqual(stored, value)) return false
  }
  return true
}
