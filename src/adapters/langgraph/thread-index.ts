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

/**
 * A serialized value as the index keeps it: the text alone for the serializer's `json` type
 * (nearly every value), the whole typed form otherwise. One string instead of an object.
 */
export type Kept = string | Typed

export const keep = (t: Typed): Kept => (t.type === 'json' && 'text' in t ? t.text : t)
export const typedOf = (k: Kept): Typed => (typeof k === 'string' ? { type: 'json', text: k } : k)

/** A checkpoint as the index keeps it: its structures as JSON text, parsed only when asked for. */
export interface IndexedCheckpoint {
  ns: string
  id: string
  parent: string | undefined
  /** The checkpoint without `channel_values`, as JSON text. */
  core: string
  /** Its `channel_versions`, which say which stored values it holds. */
  versions: Record<string, ChannelVersion>
  /** Its format version (`v`): below 4, sends are rebuilt from the parent's writes. */
  v: unknown
  /** The metadata as JSON text. */
  metadata: string
}

/** A pending write as the index keeps it. */
export interface IndexedWrite {
  task: string
  path: string
  idx: number
  channel: string
  value: Kept
}

/** Where a channel value was stored: by which checkpoint, and what (undefined: the channel was empty). */
interface ValueSource {
  checkpoint: string
  value: Kept | undefined
}

/** Whether two kept values are the same serialized value (`keep` gives `json` text one form only). */
function sameKept(a: Kept, b: Kept): boolean {
  if (typeof a === 'string' || typeof b === 'string') return a === b
  return a.type === b.type && ('text' in a ? 'text' in b && a.text === b.text : 'base64' in b && a.base64 === b.base64)
}

const versionKey = (channel: string, version: ChannelVersion) => `${channel}\u0000${typeof version === 'number' ? 'n' : 's'}${String(version)}`

/** One namespace of a thread: its checkpoints, the channel values they stored, the writes against them. */
export class NamespaceIndex {
  readonly checkpoints = new Map<string, IndexedCheckpoint>()
  /** Checkpoint ids ascending as strings (uuid6 ids sort by time). */
  readonly ids: string[] = []
  /** Every stored (channel, version): one source, or several when forks stored one version twice. */
  readonly #values = new Map<string, ValueSource | ValueSource[]>()
  /** Pending writes by checkpoint id, also for checkpoints not put yet (writes may arrive first). */
  readonly #writes = new Map<string, IndexedWrite[]>()
  /** Where each (task, index) of a checkpoint's writes stands in its list: one look-up a write, not a scan. */
  readonly #writeAt = new Map<string, Map<string, number>>()

  addCheckpoint(r: CheckpointRecord): void {
    if (!this.checkpoints.has(r.id)) insertSorted(this.ids, r.id)
    const versions = r.checkpoint.channel_versions
    this.checkpoints.set(r.id, {
      ns: r.ns,
      id: r.id,
      parent: r.parent,
      core: JSON.stringify(r.checkpoint),
      versions: typeof versions === 'object' && versions !== null ? (versions as Record<string, ChannelVersion>) : {},
      v: r.checkpoint.v,
      metadata: JSON.stringify(r.metadata),
    })
    for (const v of r.values) {
      const key = versionKey(v.channel, v.version)
      const source: ValueSource = { checkpoint: r.id, value: v.value && keep(v.value) }
      const had = this.#values.get(key)
      if (had === undefined) this.#values.set(key, source)
      else if (Array.isArray(had)) had.push(source)
      else this.#values.set(key, [had, source])
    }
  }

  #stored(checkpoint: string, task: string, idx: number): number {
    return this.#writeAt.get(checkpoint)?.get(`${idx}\u0000${task}`) ?? -1
  }

  /**
   * The writes of a `putWrites` that change what is stored, as LangGraph's savers keep them: a
   * regular write (index ≥ 0) already stored for that task and index is kept as first written;
   * a special one (negative index) replaces the stored one, so it changes something only when
   * its channel, value or task path differs from the stored one's (a repeated interrupt or
   * error write would add a line and read back the same). Of several with one index in a call,
   * the last is what is stored.
   */
  effectiveWrites(checkpoint: string, task: string, writes: readonly StoredWrite[], path = ''): StoredWrite[] {
    const byIdx = new Map<number, StoredWrite>()
    for (const w of writes) {
      if (w.idx >= 0 && (byIdx.has(w.idx) || this.#stored(checkpoint, task, w.idx) >= 0)) continue
      byIdx.set(w.idx, w)
    }
    return [...byIdx.values()].filter((w) => w.idx >= 0 || !this.#storedAlready(checkpoint, task, path, w))
  }

  /** Whether the write stored for the task at `w`'s index is `w` itself (same channel, value and path). */
  #storedAlready(checkpoint: string, task: string, path: string, w: StoredWrite): boolean {
    const at = this.#stored(checkpoint, task, w.idx)
    if (at < 0) return false
    const stored = this.#writes.get(checkpoint)![at]!
    return stored.path === path && stored.channel === w.channel && sameKept(stored.value, keep(w.value))
  }

  addWrites(r: WritesRecord): void {
    let list = this.#writes.get(r.checkpoint)
    if (!list) this.#writes.set(r.checkpoint, (list = []))
    let at = this.#writeAt.get(r.checkpoint)
    if (!at) this.#writeAt.set(r.checkpoint, (at = new Map()))
    for (const w of r.writes) {
      const key = `${w.idx}\u0000${r.task}`
      const stored = at.get(key)
      const kept: IndexedWrite = { task: r.task, path: r.path ?? '', idx: w.idx, channel: w.channel, value: keep(w.value) }
      if (stored === undefined) {
        at.set(key, list.length)
        list.push(kept)
      } else if (w.idx < 0) list[stored] = kept
    }
  }

  writesOf(checkpoint: string): readonly IndexedWrite[] {
    return this.#writes.get(checkpoint) ?? []
  }

  latest(): IndexedCheckpoint | undefined {
    const id = this.ids.at(-1)
    return id === undefined ? undefined : this.checkpoints.get(id)
  }

  /**
   * The value a checkpoint holds for a channel at a version: the one stored by the nearest
   * checkpoint on its own line of ancestors (forks can store one version twice with different
   * values), else the last one stored. Undefined when no checkpoint stored it.
   */
  valueAt(c: IndexedCheckpoint, channel: string, version: ChannelVersion): ValueSource | undefined {
    const had = this.#values.get(versionKey(channel, version))
    if (!Array.isArray(had)) return had
    const by = new Map(had.map((s) => [s.checkpoint, s]))
    const seen = new Set<string>()
    for (let cur: IndexedCheckpoint | undefined = c; cur && !seen.has(cur.id); cur = cur.parent === undefined ? undefined : this.checkpoints.get(cur.parent)) {
      seen.add(cur.id)
      const s = by.get(cur.id)
      if (s) return s
    }
    return had.at(-1)
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
