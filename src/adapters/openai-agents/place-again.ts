import type { AgentInputItem } from '@openai/agents'
import type { PlacedItem } from './decode-events.js'
import { closeTurn, encodeItems, type EventDraft, ITEM_EVENT, openTurn } from './encode-items.js'

/**
 * The drafts that place `items` again, in order, after a `history/rewind` to `to` (what
 * `popItem` appends when the item it pops was only placed by a tracked run's `addItems`, its
 * vocabulary event lying earlier, so that the rewind takes items placed since with it). An item
 * whose vocabulary event lies before `to` is placed by an ITEM_EVENT pointing at that event
 * (ITEM_FROM_FIELD): the history view shows it there still. If any other is among them (its event
 * went with the rewind: a reasoning item or message the run's `addItems` wrote between tracked
 * calls), all of them go in turn `turn`, the others written again as vocabulary. Pure.
 */
export function placeAgain(items: readonly PlacedItem[], to: number, turn: number): { drafts: EventDraft[]; turn?: number } {
  if (items.length === 0) return { drafts: [] }
  const batch = items.map((p) => p.item)
  const placedFrom = (_item: AgentInputItem, i: number) => {
    const from = (items[i] as PlacedItem).from
    return from < to ? from : undefined
  }
  const opened = openTurn(turn)
  const encoded = encodeItems(batch, opened.state, { placedFrom })
  // Only placements: no message, hence no turn or step around them.
  if (!needsTurn(items, to)) return { drafts: encoded.drafts.filter((d) => d.type === ITEM_EVENT) }
  return { drafts: [opened.draft, ...encoded.drafts, ...closeTurn(encoded.state, 'completed')], turn }
}

/** True when some of `items` have their vocabulary event at or after `to`: `placeAgain` writes them in a turn. */
export function needsTurn(items: readonly PlacedItem[], to: number): boolean {
  return items.some((p) => p.from >= to)
}
