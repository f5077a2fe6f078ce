import { readField } from './as-object.js'
import type { SessionEvent } from './schema.js'

/**
 * A batch cut before each event where the kept part of one of its `history/compact` events
 * starts (its `firstKeptSeq`), past the batch's first event: each part is appended on its own.
 *
 * Why: a load from the last compaction (§15.1) reads from `firstKeptSeq` on and trusts what
 * precedes it unread. An append is one write and one sync (§5.2), and a power cut can zero the
 * first block of a write while keeping later blocks of it (§6.3): a kept part starting inside
 * the write that also holds those zeros would be read past them, where a full load cuts, and
 * whatever the resumed session acknowledged next would go with them. Appended after the part
 * before it is durable, the kept part never shares a write with what precedes it.
 */
export function cutAtKeptStarts<E extends SessionEvent>(batch: readonly E[]): (readonly E[])[] {
  if (batch.length === 0) return []
  // The common case, read plainly: no compaction in the batch, nothing to cut.
  try {
    if (!batch.some((e) => e.type === 'history/compact')) return [batch]
  } catch {
    // An event the host made unreadable: judged below, read by read.
  }
  // Read guarded: an event the host made unreadable (a throwing getter, a revoked Proxy) cuts
  // nothing here; the backend refuses it (`E_NOT_JSON`) like any event it cannot serialize.
  const seqs = batch.map((e) => readField(e, 'seq'))
  const first = seqs[0]
  if (typeof first !== 'number') return [batch]
  let cuts: Set<number> | undefined
  for (const [i, e] of batch.entries()) {
    const k = readField(e, 'type') === 'history/compact' ? readField(readField(e, 'data'), 'firstKeptSeq') : undefined
    const seq = seqs[i]
    if (typeof k === 'number' && typeof seq === 'number' && k > first && k <= seq) (cuts ??= new Set()).add(k)
  }
  if (!cuts) return [batch]
  const parts: (readonly E[])[] = []
  let from = 0
  for (let i = 1; i < batch.length; i++) {
    const seq = seqs[i]
    if (typeof seq !== 'number' || !cuts.has(seq)) continue
    parts.push(batch.slice(from, i))
    from = i
  }
  parts.push(batch.slice(from))
  return parts
}
