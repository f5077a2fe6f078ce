import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import type { SessionEvent } from '../../session/schema.js'
import { ITEM_FIELD, PROVISIONAL_FIELD } from './encode-items.js'
import { blocksText } from './item-kind.js'

/** An item of the session and the seq of the event that placed it (what `history/rewind` cuts). */
export interface PlacedItem {
  seq: number
  item: AgentInputItem
}

/**
 * The session's items as the Agents SDK sees them (pure), in the order they were added:
 * - every event carrying an item verbatim gives that item;
 * - what `trackToolCalls` wrote ahead of a run gives items only when the turn it opened did not
 *   complete: the run's own `addItems` placed them otherwise;
 * - a `tool/result` without an item (the result crash repair wrote for an interrupted call) gives a
 *   `function_call_result` carrying its text, for a call this adapter recorded;
 * - `history/rewind` drops every item placed at or after its `to`.
 */
export function decodePlacedItems(events: readonly SessionEvent[]): PlacedItem[] {
  const { items, seqs } = decode(events)
  return items.map((item, i) => ({ seq: seqs[i] as number, item }))
}

export function decodeItems(events: readonly SessionEvent[]): AgentInputItem[] {
  return decode(events).items
}

// Parallel arrays rather than an object per item: a long session decodes without garbage.
function decode(events: readonly SessionEvent[]): { items: AgentInputItem[]; seqs: number[] } {
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
  let turnStart: number | undefined
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
        if (typeof to === 'number') {
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
  return { items, seqs }
}

/** The name of the recorded call `callId` (looked up only for a result repair wrote). */
function callName(items: readonly AgentInputItem[], callId: string): string | undefined {
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as { type?: unknown; callId?: unknown; name?: unknown }
    if (item.type === 'function_call' && item.callId === callId && typeof item.name === 'string') return item.name
  }
  return undefined
}
