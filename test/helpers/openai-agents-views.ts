import type { AgentInputItem } from '@openai/agents'
import { toModelHistory } from '../../src/session/history.js'
import type { SessionEvent } from '../../src/session/schema.js'

// What an OpenAI Agents session shows, as one line per item, from getItems and from the history
// view (§7), for the popItem tests to compare.

type Part = { type?: string; text?: string }
export const textOf = (content: unknown): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? (content as Part[]).map((p) => p.text ?? '').join('') : ''

/** One line per item: what a model is shown. The summary item (input_text parts) is `summary`. */
export function itemsView(items: readonly AgentInputItem[]): string[] {
  return items.map((item) => {
    const o = item as { type?: string; role?: string; callId?: string; content?: unknown; output?: unknown }
    if (o.type === 'function_call') return `call ${o.callId}`
    if (o.type === 'function_call_result') return `result ${o.callId} ${textOf([o.output])}`
    if (o.type === 'reasoning') return `reasoning ${textOf(o.content)}`
    if (o.role === 'user' && Array.isArray(o.content)) return `summary ${textOf(o.content)}`
    return `${o.role} ${textOf(o.content)}`
  })
}

/** The same lines from the history view; the results §7 makes up for unanswered calls apart. */
export function historyView(events: readonly SessionEvent[]): { shown: string[]; synthetic: string[] } {
  const shown: string[] = []
  const synthetic: string[] = []
  for (const m of toModelHistory(events).messages) {
    if (m.compaction) shown.push(`summary ${textOf(m.content)}`)
    else if (m.role === 'tool') (m.synthetic ? synthetic : shown).push(m.synthetic ? `${m.callId}` : `result ${m.callId} ${textOf(m.content)}`)
    else if (typeof m.content === 'string') shown.push(`${m.role} ${m.content}`)
    else {
      for (const b of m.content as { type: string; text?: string; callId?: string }[]) {
        if (b.type === 'text') shown.push(`${m.role} ${b.text}`)
        else if (b.type === 'reasoning') shown.push(`reasoning ${b.text}`)
        else if (b.type === 'tool-call') shown.push(`call ${b.callId}`)
      }
    }
  }
  return { shown, synthetic }
}

/** The calls getItems shows without a result after them (the history view answers those, §7). */
export function unanswered(items: readonly AgentInputItem[]): string[] {
  const open: string[] = []
  for (const item of items) {
    const o = item as { type?: string; callId?: string }
    if (o.type === 'function_call') open.push(o.callId!)
    if (o.type === 'function_call_result') open.splice(open.indexOf(o.callId!), 1)
  }
  return open
}
