import type { RunnableConfig } from '@langchain/core/runnables'
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
  WRITES_IDX_MAP,
  copyCheckpoint,
} from '@langchain/langgraph-checkpoint'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'
import type { ListProblem, SessionPersistence } from '../../persistence.js'
import { describeLocation } from '../../session/location.js'
import { defaultLogger } from '../../session/logger.js'
import { loadDeltaHistory, planDeltaHistory } from './delta-history.js'
import { beforeId, checkpointIdOf, listNamespace, readRef, requireRef } from './config.js'
import { type CheckpointRecord, checkpointDraft, type StoredValue, type StoredWrite, writesDraft } from './events.js'
import { type SessionCheckpointSaverOptions, parseOptions } from './options.js'
import { THREAD_META_FIELD, threadSessionId } from './thread-id.js'
import type { IndexedCheckpoint, NamespaceIndex, ThreadIndex } from './thread-index.js'
import { Threads } from './threads.js'
import { buildTuple, matchesFilter, planTuple } from './tuples.js'
import { dumpJsonObject, dumpTyped, dumpTypedOrNothing } from './typed.js'

export type { SessionCheckpointSaverOptions } from './options.js'

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
/** What makes `list()` across threads leave a thread out (and report it) instead of failing. */
const LEFT_OUT = ['E_CORRUPT', 'E_FORMAT_UNSUPPORTED', 'E_EXISTS'] as const
/**
 * Why a thread id a header names is none a call accepts (`E_INVALID_ID`), or undefined: empty
 * (every call refuses it) or without a session id (`threadSessionId` refuses it).
 */
function invalidThreadId(threadId: string): SessionPersistenceError | undefined {
  if (threadId === '') return new SessionPersistenceError('E_INVALID_ID', 'a thread id must be a non-empty string')
  try {
    threadSessionId(threadId)
    return undefined
  } catch (err) {
    if (isSessionPersistenceError(err, 'E_INVALID_ID')) return err
    throw err
  }
}
const isVersion = (v: unknown) => (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'string'

/**
 * A LangGraph checkpointer over any `SessionPersistence`: one session per thread, every `put`
 * and `putWrites` one durable append, nothing ever rewritten. `getTuple` and `list` answer from
 * an index of the thread's log, built from one read when the thread is first used and kept
 * current by each append. A thread is held (its writer lock taken) while it is used and closed
 * `idleMs` after its last call; another process writing it meanwhile gets `E_LOCKED`.
 */
export class SessionCheckpointSaver extends BaseCheckpointSaver {
  readonly persistence: SessionPersistence
  readonly #threads: Threads
  readonly #onProblem: ((problem: ListProblem) => void) | undefined

  constructor(options: SessionCheckpointSaverOptions) {
    const parsed = parseOptions(options)
    super(parsed.serde)
    this.persistence = parsed.persistence
    this.#onProblem = parsed.onProblem
    this.#threads = new Threads(parsed.persistence, parsed.idleMs, parsed.now)
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const ref = readRef('getTuple', config)
    if (!ref) return undefined
    const plan = await this.#threads.run(ref.threadId, async (t) => {
      const ns = (await this.#threads.readable(t))?.ns(ref.ns)
      const record = ref.checkpointId === undefined ? ns?.latest() : ns?.checkpoints.get(ref.checkpointId)
      return ns && record ? planTuple(ref.threadId, ns, record) : undefined
    })
    return plan && buildTuple(this.serde, plan, this)
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const ref = readRef('list', config)
    const nsFilter = listNamespace(config)
    // Without a thread too: MemorySaver keeps to a checkpoint id across threads.
    const idFilter = ref ? ref.checkpointId : checkpointIdOf('list', config)
    const before = beforeId(options?.before)
    const { limit, filter } = options ?? {}
    if (limit !== undefined && limit !== null && !Number.isInteger(limit)) {
      throw new SessionPersistenceError('E_CONFIG', `list: limit must be an integer, got ${String(limit)}`)
    }
    if (filter !== undefined && filter !== null && !isObject(filter)) {
      throw new SessionPersistenceError('E_CONFIG', 'list: filter must be an object of metadata fields')
    }
    const max = limit ?? Infinity
    if (max <= 0) return
    // The checkpoints listed, newest first in each namespace: at most `cap` of each (a thread's
    // list stops at the limit; across threads a checkpoint left out as unreadable takes no
    // place under it, so an older one may be listed in its place: no cap, and each is planned
    // only when it is yielded).
    const select = <T,>(index: ThreadIndex | undefined, cap: number, take: (ns: NamespaceIndex, record: IndexedCheckpoint) => T): T[] => {
      const out: T[] = []
      for (const [name, ns] of index?.namespaces ?? []) {
        if (nsFilter !== undefined && name !== nsFilter) continue
        let taken = 0
        for (let i = ns.ids.length - 1; i >= 0 && taken < cap; i--) {
          const id = ns.ids[i]!
          if (idFilter !== undefined && id !== idFilter) continue
          if (before !== undefined && id >= before) continue
          const record = ns.checkpoints.get(id)!
          if (filter && !matchesFilter(record.metadata, filter)) continue
          out.push(take(ns, record))
          taken++
        }
      }
      return out
    }
    const newestFirst = (a: { record: IndexedCheckpoint }, b: { record: IndexedCheckpoint }) => (a.record.id < b.record.id ? 1 : a.record.id > b.record.id ? -1 : 0)
    if (ref) {
      const plans = await this.#threads.run(ref.threadId, async (t) => select(await this.#threads.readable(t), max, (ns, record) => planTuple(ref.threadId, ns, record)))
      // Newest first across namespaces: uuid6 ids sort by time as strings.
      plans.sort(newestFirst)
      for (const plan of plans.slice(0, max)) yield await buildTuple(this.serde, plan, this)
      return
    }
    {
      // Every thread of the backend: those held are read from their index, the others from a
      // lock-free snapshot, so listing never takes a thread from another process.
      // A log that cannot be read is left out and reported, as the backend's own list() does (§4.6).
      const ids = new Set(this.#threads.heldThreadIds())
      for (const listing of await this.persistence.list(this.#onProblem ? { onProblem: this.#onProblem } : undefined)) {
        const threadId = listing.meta[THREAD_META_FIELD]
        if (typeof threadId !== 'string') continue
        // A header naming a thread id no call accepts (written by hand or by another tool) is
        // that session left out, not the listing's failure: the thread would have no session id.
        const invalid = invalidThreadId(threadId)
        if (invalid) {
          this.#problem({
            path: describeLocation(listing.location),
            code: invalid.code,
            message: `session ${listing.meta.id} left out of list(): its header names LangGraph thread ${JSON.stringify(threadId)}: ${invalid.message}`,
          })
          continue
        }
        ids.add(threadId)
      }
      const found: { threadId: string; ns: NamespaceIndex; record: IndexedCheckpoint }[] = []
      for (const threadId of ids) {
        try {
          found.push(...(await this.#threads.run(threadId, async (t) => select(await this.#threads.snapshot(t), Infinity, (ns, record) => ({ threadId, ns, record })))))
        } catch (err) {
          // E_EXISTS: the session at the thread's id is not its log (a copy elsewhere names the thread).
          if (!LEFT_OUT.some((code) => isSessionPersistenceError(err, code))) throw err
          this.#report(threadId, err as SessionPersistenceError)
        }
      }
      // Newest first across namespaces and threads.
      found.sort(newestFirst)
      // Across threads, a checkpoint holding a value the serializer cannot read back is left out
      // and reported, as a damaged thread is, and takes no place under the limit.
      let yielded = 0
      for (const { threadId, ns, record } of found) {
        if (yielded >= max) return
        const plan = planTuple(threadId, ns, record)
        let tuple: CheckpointTuple
        try {
          tuple = await buildTuple(this.serde, plan, this)
        } catch (err) {
          if (!isSessionPersistenceError(err, 'E_CORRUPT')) throw err
          this.#report(threadId, err, `checkpoint ${record.id} of thread ${JSON.stringify(threadId)}`)
          continue
        }
        yielded++
        yield tuple
      }
    }
  }

  /** A thread's log (or one of its checkpoints) that `list()` across threads leaves out. */
  #report(threadId: string, err: SessionPersistenceError, what = `thread ${JSON.stringify(threadId)}`): void {
    this.#problem({ path: err.path ?? threadSessionId(threadId), code: err.code, message: `${what} left out of list(): ${err.message}` })
  }

  /** Tells `onProblem` (by default stderr) of what `list()` across threads leaves out. */
  #problem(problem: ListProblem): void {
    if (this.#onProblem) this.#onProblem(problem)
    else defaultLogger().warn(problem.message)
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const ref = requireRef('put', config)
    if (!isObject(checkpoint) || typeof checkpoint.id !== 'string' || checkpoint.id === '') {
      throw new SessionPersistenceError('E_INVALID_EVENT', 'put: checkpoint must be an object with a non-empty string id')
    }
    if (!isObject(metadata)) throw new SessionPersistenceError('E_INVALID_EVENT', 'put: metadata must be an object')
    const versions = newVersions ?? {}
    if (!isObject(versions) || !Object.values(versions).every(isVersion)) {
      throw new SessionPersistenceError('E_INVALID_EVENT', 'put: newVersions must map channels to number or string versions')
    }
    const sessionId = threadSessionId(ref.threadId)
    // Captured now: LangGraph goes on changing its checkpoint after the call.
    let copy: Checkpoint
    try {
      copy = copyCheckpoint(checkpoint)
    } catch (cause) {
      // A cycle in versions_seen (its deep copy overflows the stack), a getter that throws.
      throw new SessionPersistenceError('E_NOT_JSON', `put: checkpoint ${checkpoint.id} of thread ${JSON.stringify(ref.threadId)} cannot be copied: ${cause instanceof Error ? cause.message : 'it threw'}`, {
        sessionId,
        cause,
      })
    }
    const { channel_values: channelValues = {}, ...core } = copy
    const values = channelValues as Record<string, unknown>
    const what = `checkpoint ${copy.id} of thread ${JSON.stringify(ref.threadId)}`
    // Serialized while the thread's earlier calls run, but queued now: appends keep call order.
    const record = Promise.all([
      dumpJsonObject(this.serde, core, `${what}`, sessionId),
      dumpJsonObject(this.serde, metadata, `the metadata of ${what}`, sessionId),
      Promise.all(
        Object.entries(versions).map(async ([channel, version]): Promise<StoredValue> => {
          if (!Object.hasOwn(values, channel)) return { channel, version }
          // A value the serializer turns into nothing (a function) is stored as no value: the channel reads as absent.
          const value = await dumpTypedOrNothing(this.serde, values[channel], `channel '${channel}' of ${what}`, sessionId)
          return value === undefined ? { channel, version } : { channel, version, value }
        }),
      ),
    ]).then(
      ([coreJson, metaJson, stored]): CheckpointRecord => ({
        ns: ref.ns,
        id: copy.id,
        ...(ref.checkpointId === undefined ? {} : { parent: ref.checkpointId }),
        checkpoint: coreJson,
        metadata: metaJson,
        values: stored,
      }),
    )
    await this.#threads.submit(ref.threadId, record, (_index, r) => [checkpointDraft(r)])
    return { configurable: { thread_id: ref.threadId, checkpoint_ns: ref.ns, checkpoint_id: copy.id } }
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const ref = requireRef('putWrites', config)
    const checkpointId = ref.checkpointId
    if (checkpointId === undefined) {
      throw new SessionPersistenceError('E_CONFIG', 'putWrites: config.configurable.checkpoint_id is missing: writes belong to a checkpoint')
    }
    if (typeof taskId !== 'string' || taskId === '') throw new SessionPersistenceError('E_CONFIG', 'putWrites: taskId must be a non-empty string')
    if (taskPath !== undefined && typeof taskPath !== 'string') throw new SessionPersistenceError('E_CONFIG', 'putWrites: taskPath must be a string')
    if (!Array.isArray(writes) || !writes.every((w) => Array.isArray(w) && typeof w[0] === 'string')) {
      throw new SessionPersistenceError('E_INVALID_EVENT', 'putWrites: writes must be [channel, value] pairs')
    }
    const sessionId = threadSessionId(ref.threadId)
    const serialized = Promise.all(
      writes.map(async ([channel, value], i): Promise<StoredWrite> => ({
        idx: Object.hasOwn(WRITES_IDX_MAP, channel) ? WRITES_IDX_MAP[channel]! : i,
        channel,
        value: await dumpTyped(this.serde, value, `write ${i} (channel '${channel}') of task ${taskId}`, sessionId),
      })),
    )
    await this.#threads.submit(ref.threadId, serialized, (index, stored) => {
      const effective = index.nsForWrite(ref.ns).effectiveWrites(checkpointId, taskId, stored, taskPath ?? '')
      if (effective.length === 0) return undefined
      return [writesDraft({ ns: ref.ns, checkpoint: checkpointId, task: taskId, ...(taskPath ? { path: taskPath } : {}), writes: effective })]
    })
  }

  /** LangGraph's `DeltaChannel` walk (beta), answered from the thread's index: the result of the base class's walk. */
  override async getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    if (!isObject(options) || !Array.isArray(options.channels)) {
      throw new SessionPersistenceError('E_CONFIG', 'getDeltaChannelHistory: options must be { config, channels } with channels an array of channel names')
    }
    const { config, channels } = options
    if (channels.length === 0) return {}
    const ref = readRef('getDeltaChannelHistory', config)
    const nothing = () => Object.fromEntries(channels.map((ch): [string, DeltaChannelHistory] => [ch, { writes: [] }]))
    if (!ref) return nothing()
    const plans = await this.#threads.run(ref.threadId, async (t) => {
      const ns = (await this.#threads.readable(t))?.ns(ref.ns)
      const target = ref.checkpointId === undefined ? ns?.latest() : ns?.checkpoints.get(ref.checkpointId)
      return ns && target ? planDeltaHistory(ns, target, channels) : undefined
    })
    return plans ? loadDeltaHistory(this.serde, ref.threadId, plans) : nothing()
  }

  /**
   * Deletes the thread's session (SPEC 4.9): `E_LOCKED` while another process holds it;
   * `E_EXISTS`, deleting nothing, when the session at its id is not this thread's log (its
   * header names no thread or another), as reads refuse it; nothing to do when there is none.
   */
  async deleteThread(threadId: string): Promise<void> {
    if (typeof threadId !== 'string' || threadId === '') throw new SessionPersistenceError('E_CONFIG', 'deleteThread: threadId must be a non-empty string')
    await this.#threads.end(threadId, async (t) => {
      if (!(await this.#threads.ownedLog(t))) return
      await this.#threads.release(t)
      try {
        await this.persistence.delete(t.sessionId)
      } catch (err) {
        if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
      }
    })
  }

  /** Closes a thread now (after its pending calls), releasing its lock, instead of after `idleMs`. */
  async release(threadId: string): Promise<void> {
    if (typeof threadId !== 'string' || threadId === '') throw new SessionPersistenceError('E_CONFIG', 'release: threadId must be a non-empty string')
    await this.#threads.end(threadId, (t) => this.#threads.release(t))
  }

  /** Closes every thread (after its pending calls), releasing every lock. The saver stays usable. */
  async close(): Promise<void> {
    await this.#threads.closeAll()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}

export type { SerializerProtocol }
