import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../core/as-object.js'
import type { SessionEvent } from '../../core/schema.js'
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
  let placed: (PlacedItem & { provisional: boolean })[] = []
  let turnStart: number | undefined
  let turnHasProvisional = false
  const callNames = new Map<string, string>()
  for (const e of events) {
    switch (e.type) {
      case 'turn/start':
        turnStart = placed.length
        turnHasProvisional = false
        continue
      case 'turn/end': {
        const kind = asObject(asObject(e.data)?.reason)?.kind
        if (kind === 'completed' && turnStart !== undefined && turnHasProvisional) {
          const from = turnStart
          placed = placed.filter((p, i) => i < from || !p.provisional)
        }
        turnStart = undefined
        continue
      }
      case 'history/rewind': {
        const to = asObject(e.data)?.to
        if (typeof to === 'number') {
          placed = placed.filter((p) => p.seq < to)
          if (turnStart !== undefined) turnStart = Math.min(turnStart, placed.length)
        }
        continue
      }
    }
    const item = asObject(e[ITEM_FIELD])
    if (item) {
      if (item.type === 'function_call' && typeof item.callId === 'string' && typeof item.name === 'string') {
        callNames.set(item.callId, item.name)
      }
      const provisional = e[PROVISIONAL_FIELD] === true
      if (provisional) turnHasProvisional = true
      placed.push({ seq: e.seq, item: item as AgentInputItem, provisional })
      continue
    }
    if (e.type === 'tool/result') {
      const data = asObject(e.data)
      const callId = data?.callId
      const name = typeof callId === 'string' ? callNames.get(callId) : undefined
      if (typeof callId !== 'string' || name === undefined) continue
      const result: AgentInputItem = {
        type: 'function_call_result',
        name,
        callId,
        status: data?.isError === true ? 'incomplete' : 'completed',
        output: { type: 'text', text: blocksText(data?.content) },
      }
      turnHasProvisional = true
      placed.push({ seq: e.seq, item: result, provisional: true })
    }
  }
  return placed.map(({ seq, item }) => ({ seq, item }))
}

export function decodeItems(events: readonly SessionEvent[]): AgentInputItem[] {
  return decodePlacedItems(events).map((p) => p.item)
}
