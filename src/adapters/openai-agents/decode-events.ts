import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import { historyWindow } from '../../session/history.js'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import { FIRST_ITEM_FIELD, summaryItem } from './compaction.js'
import { ITEM_EVENT, ITEM_FIELD, ITEM_FROM_FIELD, PROVISIONAL_FIELD } from './encode-items.js'
import { blocksText, classifyItem, isModelOutput, isToolResult, type ItemKind, itemKey } from './item-kind.js'

/** An item of the session and the seq of the event that placed it (what `history/rewind` cuts). */
export interface PlacedItem {
  seq: number
  /**
   * The seq of the earliest event behind the item: `seq`, or, for an item the run's `addItems`
   * only placed (`ITEM_EVENT`), the event `trackToolCalls` wrote for it earlier (the call, its
   * result, the run's input) or the still open call an approved run hands over again; for an
   * item `popItem` placed again, the event its ITEM_FROM_FIELD names. What the history view (§7)
   * shows of the item lies there: a compaction keeping the item keeps from it, a pop of it rewinds
   * to it.
   */
  from: number
  item: AgentInputItem
  /** Present (true) on the summary item of the `history/compact` in force; `seq` is that event's. */
  compaction?: true
}

/** The `history/compact` in force: its seq, its `firstKeptSeq` and its summary. */
export interface CompactionInForce {
  seq: number
  keep: number
  summary: JsonValue
  /**
   * Where the items start (`FIRST_ITEM_FIELD`, which `JsonlSession.compact` writes): the seq of
   * the event that placed the first kept item, at or after `keep`. Absent on a compaction
   * another writer (or an older release) recorded: the items then start at `keep`.
   */
  itemsFrom?: number
}

/**
 * The session's items as the Agents SDK sees them (pure), in the order they were added:
 * - every event carrying an item verbatim gives that item;
 * - what `trackToolCalls` wrote ahead of a run gives items only when the turn it opened did not
 *   complete: the run's own `addItems` placed them otherwise;
 * - a `tool/result` without an item (the result crash repair wrote for an interrupted call) gives a
 *   `function_call_result` carrying its text, for a call this adapter recorded;
 * - `history/rewind` drops every item placed at or after its `to`;
 * - with a `history/compact` in force (§7), the items placed before its `firstKeptSeq` (before
 *   its `FIRST_ITEM_FIELD`, when it has one) are replaced by one summary item (`summaryItem`),
 *   first; a result (`function_call_result`, or another item answering a `callId`) whose call is
 *   not among the items kept is left out.
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
  const { items, seqs, froms, compaction } = decode(events)
  const placed: PlacedItem[] = items.map((item, i) => ({ seq: seqs[i] as number, from: froms[i] as number, item }))
  if (compaction) placed.unshift({ seq: compaction.seq, from: compaction.seq, item: summaryItem(compaction.summary), compaction: true })
  return { placed, compaction }
}

// Parallel arrays rather than an object per item: a long session decodes without garbage.
function decode(all: readonly SessionEvent[]): { items: AgentInputItem[]; seqs: number[]; froms: number[]; compaction: CompactionInForce | undefined } {
  const window = historyWindow(all)
  const { events } = window
  const compaction: CompactionInForce | undefined = window.compaction && { ...window.compaction }
  if (compaction) {
    const itemsFrom = firstItemSeq(all, compaction)
    if (itemsFrom !== undefined) compaction.itemsFrom = itemsFrom
  }
  const items: AgentInputItem[] = []
  const seqs: number[] = []
  const froms: number[] = []
  const provisional: boolean[] = []
  // In place, from `start` (the items before it stay): a turn's end filters only its own items.
  const keep = (pick: (i: number) => boolean, start = 0) => {
    let j = start
    for (let i = start; i < items.length; i++) {
      if (!pick(i)) continue
      if (i !== j) {
        items[j] = items[i] as AgentInputItem
        seqs[j] = seqs[i] as number
        froms[j] = froms[i] as number
        provisional[j] = provisional[i] as boolean
      }
      j++
    }
    items.length = j
    seqs.length = j
    froms.length = j
    provisional.length = j
  }
  // Events read from the middle of a turn (a compaction's firstKeptSeq there) start in that turn.
  let turnStart: number | undefined = 0
  let turnHasProvisional = false
  // What an item only placed (`ITEM_EVENT`) stands for: the turn's provisional events, by what
  // the writer's matcher (recorded-items.ts) matched them on, earliest first; and the calls, by id.
  let written = new Map<string, number[]>()
  const calls = new Map<string, number>()
  const place = (seq: number, item: AgentInputItem, isProvisional: boolean, from = seq) => {
    items.push(item)
    seqs.push(seq)
    froms.push(from)
    provisional.push(isProvisional)
    if (isProvisional) turnHasProvisional = true
  }
  for (const e of events) {
    switch (e.type) {
      case 'turn/start':
        turnStart = items.length
        turnHasProvisional = false
        written = new Map()
        continue
      case 'turn/end': {
        const kind = asObject(asObject(e.data)?.reason)?.kind
        if (kind === 'completed' && turnStart !== undefined && turnHasProvisional) {
          keep((i) => !provisional[i], turnStart)
        }
        turnStart = undefined
        written = new Map()
        continue
      }
      case 'history/rewind': {
        const to = asObject(e.data)?.to
        // As the history view takes it (history.ts `rewoundRanges`): a `to` that is not a seq before this event is ignored.
        if (typeof to === 'number' && Number.isSafeInteger(to) && to >= 0 && to < e.seq) {
          keep((i) => (seqs[i] as number) < to)
          if (turnStart !== undefined) turnStart = Math.min(turnStart, items.length)
          for (const [key, list] of written) written.set(key, list.filter((s) => s < to))
          for (const [callId, s] of calls) if (s >= to) calls.delete(callId)
        }
        continue
      }
    }
    const item = asObject(e[ITEM_FIELD])
    if (item) {
      const isProvisional = e[PROVISIONAL_FIELD] === true
      let from = e.seq
      if (isProvisional || e.type === ITEM_EVENT || item.type === 'function_call') {
        const k = classifyItem(item)
        if (k && k.kind !== 'other') {
          if (e.type !== ITEM_EVENT) {
            const key = isProvisional ? writtenKey(k) : undefined
            if (key !== undefined) {
              const list = written.get(key)
              if (list) list.push(e.seq)
              else written.set(key, [e.seq])
            }
            if (k.kind === 'call') calls.set(k.callId, e.seq)
          } else if (!isProvisional) {
            // Placed only: its vocabulary event was written before (or lies before the window);
            // placed again by `popItem`, the event says which.
            const again = e[ITEM_FROM_FIELD]
            if (typeof again === 'number' && Number.isSafeInteger(again) && again >= 0 && again < e.seq) from = again
            else {
              const key = writtenKey(k)
              const earlier = key === undefined ? undefined : written.get(key)?.shift()
              from = earlier ?? (k.kind === 'call' ? calls.get(k.callId) : undefined) ?? e.seq
            }
          }
        }
      }
      place(e.seq, item as AgentInputItem, isProvisional, from)
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
  if (compaction?.itemsFrom !== undefined) {
    const itemsFrom = compaction.itemsFrom
    keep((i) => (seqs[i] as number) >= itemsFrom)
  }
  if (compaction) keep(answeringKeptCall(items))
  return { items, seqs, froms, compaction }
}

/** What `RecordedItems.matcher` matches a placed item on: a call or result by its id, any other item by its JSON. */
function writtenKey(k: ItemKind): string | undefined {
  if (k.kind === 'call') return `call ${k.callId}`
  if (k.kind === 'result') return `result ${k.callId}`
  const key = itemKey(k.item)
  return key === undefined ? undefined : `item ${key}`
}

/** The compaction's `FIRST_ITEM_FIELD`, if it is a seq from its `firstKeptSeq` to its own seq. */
function firstItemSeq(all: readonly SessionEvent[], compaction: { seq: number; keep: number }): number | undefined {
  // Events are in seq order, usually from 0 or from a tail's first seq: look it up from the end.
  let event: SessionEvent | undefined
  for (let i = all.length - 1; i >= 0; i--) {
    const e = all[i]!
    if (e.seq === compaction.seq) {
      event = e
      break
    }
    if (e.seq < compaction.seq) break
  }
  const at = event?.[FIRST_ITEM_FIELD]
  return typeof at === 'number' && Number.isSafeInteger(at) && at >= compaction.keep && at <= compaction.seq ? at : undefined
}

/**
 * The items a compaction keeping the last `keepItems` of `placed` (summary left out) shows: those,
 * less a result whose call is not among them (as `getItems` shows them after it).
 */
export function keptItems(placed: readonly PlacedItem[], keepItems: number): PlacedItem[] {
  const items = placed.filter((p) => !p.compaction)
  const kept = keepItems === 0 ? [] : items.slice(Math.max(0, items.length - keepItems))
  const shown = answeringKeptCall(kept.map((p) => p.item))
  return kept.filter((_, i) => shown(i))
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
