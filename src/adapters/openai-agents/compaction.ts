import type { AgentInputItem } from '@openai/agents'
import { asObject, type JsonObject } from '../../session/as-object.js'
import type { JsonValue } from '../../session/schema.js'

/**
 * Extra field of the `history/compact` that `JsonlSession.compact` writes: the seq of the event
 * that placed the first kept item. Its `firstKeptSeq` may lie earlier (what `trackToolCalls`
 * wrote ahead of a run for a kept call, its result or the run's input, which the run's `addItems`
 * only placed), where the history view (§7) must start to show them; `getItems` shows only the
 * items placed from this seq on, so the items kept are the ones asked for.
 */
export const FIRST_ITEM_FIELD = 'openaiAgentsFirstItemSeq'

/**
 * The item that stands for the summary of the `history/compact` in force (docs/contract.md §7),
 * first in `getItems()`: a user message whose content is `input_text` parts. A string summary is
 * one part; of a block summary, `text` blocks become `input_text` parts, `input_*` parts (as the
 * session stores a user message's images and files) stay as they are, other blocks are left out.
 */
export function summaryItem(summary: JsonValue): AgentInputItem {
  const content: JsonObject[] = []
  if (typeof summary === 'string') content.push({ type: 'input_text', text: summary })
  else if (Array.isArray(summary)) {
    for (const block of summary) {
      const b = asObject(block)
      if (b?.type === 'text' && typeof b.text === 'string') content.push({ type: 'input_text', text: b.text })
      else if (typeof b?.type === 'string' && b.type.startsWith('input_')) content.push(b)
    }
  }
  if (content.length === 0) content.push({ type: 'input_text', text: '' })
  return { type: 'message', role: 'user', content } as AgentInputItem
}
