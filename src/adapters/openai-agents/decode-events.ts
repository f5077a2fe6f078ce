import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import { historyWindow } from '../../session/history.js'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import { summaryItem } from './compaction.js'
import { ITEM_FIELD, PROVISIONAL_FIELD } from './encode-items.js'
import { blocksText, classifyItem, isModelOutput, isToolResult } from './item-kind.js'

/** An item of the session and the seq of the event that placed it (what `history/rewind` cuts). */
export interface PlacedItem {
  seq: number
  item: AgentInputItem
  /** Present (true) on the summary item of the `history/compact` in force; `seq` is that event's. */
  compaction?: true
}

/** The `history/compact` in force: its seq, its `firstKeptSeq` and its summary. */
export interface CompactionInForce {
  seq: number
  keep: number
  summary: JsonValue
}

/**
 * The session's items as the Agents SDK sees them (pure), in the order they were added:
 * - every event carrying an item verbatim gives that item;
 * - what `trackToolCalls` wrote ahead of a run gives items only when the turn it opened did not
 *   complete: the run's own `addItems` placed them otherwise;
 * - a `tool/result` without an item (the result crash repair wrote for an interrupted call) gives a
 *   `function_call_result` carrying its text, for a call this adapter recorded;
 * - `history/rewind` drops every item placed at or after its `to`;
 * - with a `history/compact` in force (§7), the items placed before its `firstKeptSeq` are
 *   replaced by one summary item (`summaryItem`), first; a result (`function_call_result`, or
 *   another item answering a `callId`) whose call is not among the items kept is left out.
 *
 * Only the events from the compaction's `firstKeptSeq` on count, so the events of a load from
 * the last compaction (§15.1) give the items of the whole log.
 */
export function decodePlacedItems(events: readonly SessionEvent[]): PlacedItem[] {
  return decodeSession(events).placed
}

export function decodeItems(events: readonly SessionEvent[]): AgentInputItem[] {
  const { items, compaction } = decode(events)
  return compaction ? [summaryItem(compaction.summary), ...items] : items
}

/** The session's placed items (summary first) and the compaction in force, if any. */
export function decodeSession(events: readonly SessionEvent[]): { placed: PlacedItem[]; compaction: CompactionInForce | undefined } {
  const { items, seqs, compaction } = decode(events)
  const placed: PlacedItem[] = items.map((item, i) => ({ seq: seqs[i] as number, item }))
  if (compaction) placed.unshift({ seq: compaction.seq, item: summaryItem(compaction.summary), compaction: true })
  return { placed, compaction }
}

// Parallel arrays rather than an object per item: a long session decodes without garbage.
function decode(all: readonly SessionEvent[]): { items: AgentInputItem[]; seqs: number[]; compaction: CompactionInForce | undefined } {
  const { compaction, events } = historyWindow(all)
  let items: AgentInputItem[] = []
  let seqs: number[] = []
  let provisional: boolean[] = []
  const keep = (pick: (i: number) => boolean) => {
    const next: [AgentInputItem[], number[], boolean[]] = [[], [], []]
    for (let i = 0; i < items.length; i++) {
      if (!pick(i)) continue
      next[0].push(items[i] as AgentInputItem)
      next[1].push(seqs[i] as number)
      next[2].push(provisional[i] as boolean)
    }
    ;[items, seqs, provisional] = next
  }
  // Events read from the middle of a turn (a compaction's firstKeptSeq there) start in that turn.
  let turnStart: number | undefined = 0
  let turnHasProvisional = false
  const place = (seq: number, item: AgentInputItem, isProvisional: boolean) => {
    items.push(item)
    seqs.push(seq)
    provisional.push(isProvisional)
    if (isProvisional) turnHasProvisional = true
  }
  for (const e of events) {
    switch (e.type) {
      case 'turn/start':
        turnStart = items.length
        turnHasProvisional = false
        continue
      case 'turn/end': {
        const kind = asObject(asObject(e.data)?.reason)?.kind
        if (kind === 'completed' && turnStart !== undefined && turnHasProvisional) {
          const from = turnStart
          keep((i) => i < from || !provisional[i])
        }
        turnStart = undefined
        continue
      }
      case 'history/rewind': {
        const to = asObject(e.data)?.to
        // As the history view takes it (history.ts `rewoundRanges`): a `to` that is not a seq before this event is ignored.
        if (typeof to === 'number' && Number.isSafeInteger(to) && to >= 0 && to < e.seq) {
          keep((i) => (seqs[i] as number) < to)
          if (turnStart !== undefined) turnStart = Math.min(turnStart, items.length)
        }
        continue
      }
    }
    const item = asObject(e[ITEM_FIELD])
    if (item) {
      place(e.seq, item as AgentInputItem, e[PROVISIONAL_FIELD] === true)
      continue
    }
    if (e.type === 'tool/result') {
      const data = asObject(e.data)
      const callId = data?.callId
      const name = typeof callId === 'string' ? callName(items, callId) : undefined
      if (typeof callId !== 'string' || name === undefined) continue
      place(
        e.seq,
        {
          type: 'function_call_result',
          name,
          callId,
          status: data?.isError === true ? 'incomplete' : 'completed',
          output: { type: 'text', text: blocksText(data?.content) },
        },
        true,
      )
    }
  }
  if (compaction) keep(answeringKeptCall(items))
  return { items, seqs, compaction }
}

/** After a compaction: true for an item unless it answers a call that is not kept before it. */
function answeringKeptCall(items: readonly AgentInputItem[]): (i: number) => boolean {
  const calls = new Set<string>()
  return (i) => {
    const k = classifyItem(items[i])
    const callId = asObject(k?.item)?.callId
    if (!k || typeof callId !== 'string') return true
    if (isModelOutput(k)) calls.add(callId)
    return !isToolResult(k) || calls.has(callId)
  }
}

/** The name of the recorded call `callId` (looked up only for a result repair wrote). */
function callName(items: readonly AgentInputItem[], callId: string): string | undefined {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as { type?: unknown; callId?: unknown; name?: unknown }
    if (item.type === 'function_call' && item.callId === callId && typeof item.name === 'string') return item.name
  }
  return undefined
}
