import type { CheckpointPendingWrite, DeltaChannelHistory, SerializerProtocol } from '@langchain/langgraph-checkpoint'
import { type IndexedCheckpoint, type IndexedWrite, type Kept, type NamespaceIndex, typedOf } from './thread-index.js'
import { ordered, unreadable } from './tuples.js'
import { loadTyped } from './typed.js'

/** What `getDeltaChannelHistory` returns for one channel, before deserialization. */
export interface DeltaPlan {
  /** The channel's writes on the ancestors' path, newest first. */
  writes: IndexedWrite[]
  seed?: Kept
}

/**
 * LangGraph's walk for `DeltaChannel` (BaseCheckpointSaver.getDeltaChannelHistory, the same
 * result) over the index: from the target's parent up, each ancestor's writes to the channels
 * still wanted, until the nearest ancestor that stored a value for a channel (its seed). Only
 * what is returned is deserialized, instead of every ancestor's whole checkpoint.
 */
export function planDeltaHistory(ns: NamespaceIndex, target: IndexedCheckpoint, channels: readonly string[]): Map<string, DeltaPlan> {
  const plans = new Map<string, DeltaPlan>(channels.map((ch) => [ch, { writes: [] }]))
  const remaining = new Set(channels)
  const seen = new Set([target.id])
  const parentOf = (c: IndexedCheckpoint) => (c.parent === undefined ? undefined : ns.checkpoints.get(c.parent))
  for (let cur = parentOf(target); cur && remaining.size > 0 && !seen.has(cur.id); cur = parentOf(cur)) {
    seen.add(cur.id)
    const writes = ordered(ns.writesOf(cur.id))
    for (let i = writes.length - 1; i >= 0; i--) {
      const w = writes[i]!
      if (remaining.has(w.channel)) plans.get(w.channel)!.writes.push(w)
    }
    for (const ch of [...remaining]) {
      const version = Object.hasOwn(cur.versions, ch) ? cur.versions[ch] : undefined
      const value = version === undefined ? undefined : ns.valueAt(cur, ch, version)?.value
      if (value === undefined) continue
      plans.get(ch)!.seed = value
      remaining.delete(ch)
    }
  }
  return plans
}

/** Deserializes the plans; a stored value the serializer cannot read back is `E_CORRUPT`, as `getTuple` and `list` make it. */
export async function loadDeltaHistory(
  serde: SerializerProtocol,
  threadId: string,
  plans: Map<string, DeltaPlan>,
): Promise<Record<string, DeltaChannelHistory>> {
  const result: Record<string, DeltaChannelHistory> = {}
  for (const [ch, plan] of plans) {
    try {
      const writes = await Promise.all(
        [...plan.writes].reverse().map(async (w): Promise<CheckpointPendingWrite> => [w.task, w.channel, await loadTyped(serde, typedOf(w.value))]),
      )
      result[ch] = plan.seed === undefined ? { writes } : { writes, seed: await loadTyped(serde, typedOf(plan.seed)) }
    } catch (cause) {
      throw unreadable(threadId, `the history of channel '${ch}'`, cause)
    }
  }
  return result
}
