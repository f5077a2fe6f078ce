import type { SessionEvent } from '../../index.js'
import {
  CHECKPOINT_EVENT,
  type ChannelVersion,
  type CheckpointRecord,
  parseCheckpoint,
  parseWrites,
  type StoredWrite,
  turnOf,
  WRITES_EVENT,
  type WritesRecord,
} from './events.js'
import type { Typed } from './typed.js'

/** A pending write as the index keeps it: its record's task and path, the write itself. */
export interface IndexedWrite extends StoredWrite {
  task: string
  path: string
}

/** Where a channel value was stored: by which checkpoint, and what (undefined: the channel was empty). */
interface ValueSource {
  checkpoint: string
  value: Typed | undefined
}

const versionKey = (channel: string, version: ChannelVersion) => `${channel}\u0000${typeof version}\u0000${String(version)}`
const writeKey = (task: string, idx: number) => `${task}\u0000${idx}`

/** One namespace of a thread: its checkpoints, the channel values they stored, the writes against them. */
export class NamespaceIndex {
  readonly checkpoints = new Map<string, CheckpointRecord>()
  /** Checkpoint ids ascending as strings (uuid6 ids sort by time). */
  readonly ids: string[] = []
  /** Every stored (channel, version), usually by one checkpoint; several only when a fork reused a version. */
  readonly #values = new Map<string, ValueSource[]>()
  /** Pending writes by checkpoint id, also for checkpoints not put yet (writes may arrive first). */
  readonly #writes = new Map<string, Map<string, IndexedWrite>>()

  addCheckpoint(r: CheckpointRecord): void {
    if (!this.checkpoints.has(r.id)) insertSorted(this.ids, r.id)
    this.checkpoints.set(r.id, r)
    for (const v of r.values) {
      const key = versionKey(v.channel, v.version)
      const sources = this.#values.get(key)
      const source = { checkpoint: r.id, value: v.value }
      if (!sources) this.#values.set(key, [source])
      else sources.push(source)
    }
  }

  /**
   * The writes of a `putWrites` that change what is stored, as LangGraph's savers keep them: a
   * regular write (index ≥ 0) already stored for that task and index is kept as first written;
   * a special one (negative index) replaces the stored one.
   */
  effectiveWrites(checkpoint: string, task: string, writes: readonly StoredWrite[]): StoredWrite[] {
    const stored = this.#writes.get(checkpoint)
    const byKey = new Map<string, StoredWrite>()
    for (const w of writes) {
      const key = writeKey(task, w.idx)
      if (w.idx >= 0 && (stored?.has(key) || byKey.has(key))) continue
      byKey.set(key, w)
    }
    return [...byKey.values()]
  }

  addWrites(r: WritesRecord): void {
    let stored = this.#writes.get(r.checkpoint)
    if (!stored) this.#writes.set(r.checkpoint, (stored = new Map()))
    for (const w of r.writes) {
      const key = writeKey(r.task, w.idx)
      if (w.idx >= 0 && stored.has(key)) continue
      stored.set(key, { ...w, task: r.task, path: r.path ?? '' })
    }
  }

  writesOf(checkpoint: string): IndexedWrite[] {
    return [...(this.#writes.get(checkpoint)?.values() ?? [])]
  }

  latest(): CheckpointRecord | undefined {
    const id = this.ids.at(-1)
    return id === undefined ? undefined : this.checkpoints.get(id)
  }

  /**
   * The value a checkpoint holds for a channel at a version: the one stored by the nearest
   * checkpoint on its own line of ancestors (forks can store one version twice with different
   * values), else the last one stored. `null` when no checkpoint stored it.
   */
  valueAt(r: CheckpointRecord, channel: string, version: ChannelVersion): ValueSource | null {
    const sources = this.#values.get(versionKey(channel, version))
    if (!sources) return null
    if (sources.length === 1) return sources[0]!
    const by = new Map(sources.map((s) => [s.checkpoint, s]))
    const seen = new Set<string>()
    for (let cur: CheckpointRecord | undefined = r; cur && !seen.has(cur.id); cur = cur.parent === undefined ? undefined : this.checkpoints.get(cur.parent)) {
      seen.add(cur.id)
      const s = by.get(cur.id)
      if (s) return s
    }
    return sources.at(-1)!
  }
}

/** What a thread's log holds, indexed: built from one read of the log, then kept current by each append. */
export class ThreadIndex {
  readonly namespaces = new Map<string, NamespaceIndex>()
  /** Events in the log: the seq of the next one. */
  count = 0
  /** The last turn number used (one turn per append). */
  turn = 0

  static fromEvents(events: readonly SessionEvent[], sessionId: string): ThreadIndex {
    const index = new ThreadIndex()
    index.apply(events, sessionId)
    return index
  }

  ns(ns: string): NamespaceIndex | undefined {
    return this.namespaces.get(ns)
  }

  nsForWrite(ns: string): NamespaceIndex {
    let n = this.namespaces.get(ns)
    if (!n) this.namespaces.set(ns, (n = new NamespaceIndex()))
    return n
  }

  /** Takes in events just appended (or read), in seq order. */
  apply(events: readonly SessionEvent[], sessionId: string): void {
    for (const e of events) {
      if (e.type === CHECKPOINT_EVENT) {
        const r = parseCheckpoint(e, sessionId)
        this.nsForWrite(r.ns).addCheckpoint(r)
      } else if (e.type === WRITES_EVENT) {
        const r = parseWrites(e, sessionId)
        this.nsForWrite(r.ns).addWrites(r)
      } else {
        const t = turnOf(e)
        if (t !== undefined && t > this.turn) this.turn = t
      }
    }
    const last = events.at(-1)
    if (last) this.count = last.seq + 1
  }
}

function insertSorted(ids: string[], id: string): void {
  // Ids usually arrive in order: appending is the common case.
  if (ids.length === 0 || ids[ids.length - 1]! < id) {
    ids.push(id)
    return
  }
  let lo = 0
  let hi = ids.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (ids[mid]! < id) lo = mid + 1
    else hi = mid
  }
  ids.splice(lo, 0, id)
}
