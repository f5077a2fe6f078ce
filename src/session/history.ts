import { asObject } from './as-object.js'
import type { JsonValue, SessionEvent } from './schema.js'
import { compactionKeep } from './tail-start.js'

/** Text of the in-memory result of a call the log never answered (docs/contract.md §7). */
export const UNANSWERED_TOOL_TEXT = 'Tool call was not completed; no result was recorded.'

export type ContentBlock =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool-call'; callId: string; name: string; arguments: JsonValue }
  | { type: string; [key: string]: JsonValue }

export interface ModelMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  /** The seq of the event; absent on a synthetic message, which no event holds. */
  seq?: number
  content: JsonValue
  callId?: string
  isError?: boolean
  /**
   * Present (true) on a message no event holds as such: a result made up for a call the log
   * never answered, or an assistant message shown for calls recorded only as `tool/call`.
   */
  synthetic?: true
  /** Present (true) on the summary message of the `history/compact` in force (§7). */
  compaction?: true
}

export interface ModelHistory {
  messages: ModelMessage[]
  /** The `header` of the last `request/header` event, if any (rewinds do not change it). */
  requestHeader: JsonValue | undefined
}

/** A `history/rewind` event's effect: seqs `from <= seq < until` are out of the history view. */
export interface RewoundRange {
  from: number
  until: number
}

const ROLE_OF: Record<string, ModelMessage['role'] | undefined> = {
  'system/message': 'system',
  'user/message': 'user',
  'assistant/message': 'assistant',
  'tool/result': 'tool',
}

function toolCallIds(content: unknown): string[] {
  if (!Array.isArray(content)) return []
  const ids: string[] = []
  for (const block of content) {
    const b = asObject(block)
    if (b?.type === 'tool-call' && typeof b.callId === 'string' && !ids.includes(b.callId)) ids.push(b.callId)
  }
  return ids
}

/**
 * The seq ranges the `history/rewind` events of a log take out of the history view, merged and
 * sorted. Rewinds only ever remove: a later rewind whose range covers an earlier rewind event
 * does not bring that event's range back. A rewind whose `to` is not a non-negative integer is
 * ignored (the storage is vocabulary-agnostic, so a malformed event must not break a resume).
 */
export function rewoundRanges(events: readonly SessionEvent[]): RewoundRange[] {
  const ranges: RewoundRange[] = []
  for (const e of events) {
    if (e.type !== 'history/rewind') continue
    const to = asObject(e.data)?.to
    if (typeof to !== 'number' || !Number.isSafeInteger(to) || to < 0 || to >= e.seq) continue
    ranges.push({ from: to, until: e.seq })
  }
  ranges.sort((a, b) => a.from - b.from)
  const merged: RewoundRange[] = []
  for (const r of ranges) {
    const last = merged.at(-1)
    if (last && r.from <= last.until) last.until = Math.max(last.until, r.until)
    else merged.push({ ...r })
  }
  return merged
}

/** A predicate telling whether an event's seq lies in one of `ranges` (binary search). */
export function isRewoundBy(ranges: readonly RewoundRange[]): (seq: number) => boolean {
  return (seq) => {
    let lo = 0
    let hi = ranges.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const r = ranges[mid]!
      if (seq < r.from) hi = mid - 1
      else if (seq >= r.until) lo = mid + 1
      else return true
    }
    return false
  }
}

/**
 * The conversation a model provider needs (docs/contract.md §7): one message per system, user
 * and assistant message and per tool result, in log order; chunks and every other type produce
 * none. Messages of events a `history/rewind` took out are left out (§2.1).
 *
 * The result stays balanced for a provider whatever a rewind cut: every tool call of a shown
 * assistant message gets exactly one tool message (a call whose result was rewound, or never
 * recorded, gets a synthetic error result right after the other results of its message), and a
 * result whose assistant message was rewound is left out with it, since a provider refuses a
 * result for a call it never saw.
 *
 * A `tool/call` that no assistant message of the log holds (a recorder writes the call before
 * the step's message, and a crash in the tool left only the call) is shown as a synthetic
 * assistant message holding that `tool-call` block, at the call's place; calls recorded one
 * after another share one such message. So the repair's result always has its call.
 */
export function toModelHistory(all: readonly SessionEvent[]): ModelHistory {
  const { rewound, compaction, events } = historyWindow(all)
  const shown = events.filter((e) => !rewound(e.seq))
  const answered = new Set<string>()
  const shownCalls = new Set<string>()
  const hiddenCalls = new Set<string>()
  const messageCalls = new Set<string>() // calls held by any assistant message, shown or not
  for (const e of events) {
    if (e.type === 'assistant/message') for (const id of toolCallIds(asObject(e.data)?.content)) messageCalls.add(id)
  }
  for (const e of events) {
    const data = asObject(e.data)
    if (e.type === 'tool/call') {
      // A call only a `tool/call` records is shown (synthetic message below) unless rewound.
      if (typeof data?.callId === 'string' && !messageCalls.has(data.callId)) (rewound(e.seq) ? hiddenCalls : shownCalls).add(data.callId)
    } else if (e.type === 'assistant/message') {
      for (const id of toolCallIds(data?.content)) (rewound(e.seq) ? hiddenCalls : shownCalls).add(id)
    } else if (e.type === 'tool/result' && !rewound(e.seq) && typeof data?.callId === 'string') {
      answered.add(data.callId)
    }
  }
  const messages: ModelMessage[] = []
  let unanswered: string[] = [] // calls of the last assistant message that no result will answer
  const closeUnanswered = () => {
    for (const callId of unanswered) {
      messages.push({
        role: 'tool',
        callId,
        isError: true,
        synthetic: true,
        content: [{ type: 'text', text: UNANSWERED_TOOL_TEXT }],
      })
    }
    unanswered = []
  }
  let requestHeader: JsonValue | undefined
  for (const e of all) {
    if (e.type !== 'request/header') continue
    const header = asObject(e.data)?.header
    if (header !== undefined) requestHeader = header as JsonValue
  }
  let orphanCalls: ModelMessage | undefined // the synthetic assistant message still open to more calls
  if (compaction) messages.push({ role: 'user', seq: compaction.seq, compaction: true, content: compaction.summary })
  for (const e of shown) {
    if (e.type === 'tool/call') {
      const data = asObject(e.data)
      const callId = data?.callId
      if (typeof callId !== 'string' || messageCalls.has(callId)) continue
      const block = { type: 'tool-call', callId, name: String(data?.name ?? ''), arguments: (data?.arguments ?? null) as JsonValue }
      if (orphanCalls && messages.at(-1) === orphanCalls) {
        ;(orphanCalls.content as JsonValue[]).push(block)
      } else {
        closeUnanswered()
        orphanCalls = { role: 'assistant', synthetic: true, content: [block] }
        messages.push(orphanCalls)
      }
      if (!answered.has(callId) && !unanswered.includes(callId)) unanswered.push(callId)
      continue
    }
    const role = ROLE_OF[e.type]
    if (!role) continue
    const data = asObject(e.data)
    const callId = typeof data?.callId === 'string' ? data.callId : undefined
    // The result of a call whose assistant message was rewound: gone with its call.
    if (role === 'tool' && callId !== undefined && hiddenCalls.has(callId) && !shownCalls.has(callId)) continue
    // After a compaction, a result whose call lies before firstKeptSeq went with the summary.
    if (role === 'tool' && compaction && (callId === undefined || !shownCalls.has(callId))) continue
    if (role !== 'tool') closeUnanswered()
    const message: ModelMessage = { role, seq: e.seq, content: (data?.content ?? null) as JsonValue }
    if (role === 'tool') {
      if (callId !== undefined) message.callId = callId
      if (typeof data?.isError === 'boolean') message.isError = data.isError
    }
    messages.push(message)
    if (role === 'assistant') unanswered = toolCallIds(data?.content).filter((id) => !answered.has(id))
  }
  closeUnanswered()
  return { messages, requestHeader }
}

/** What a history view of a log starts from (§7): what rewinds took out, the compaction in force and the events that count. */
export interface HistoryWindow {
  /** Whether a seq lies in a range a `history/rewind` took out. */
  rewound: (seq: number) => boolean
  compaction: { seq: number; keep: number; summary: JsonValue } | undefined
  /** With a compaction in force, the events from its firstKeptSeq on but itself; else all of them. */
  events: readonly SessionEvent[]
}

/**
 * The one rule every history view follows (`toModelHistory`, `toAiSdkMessages`,
 * `JsonlSession.getItems`): with a compaction in force only the events from its `firstKeptSeq`
 * on count, so the view of a tail that starts there (§15.1) is the view of the whole log.
 */
export function historyWindow(all: readonly SessionEvent[]): HistoryWindow {
  const rewound = isRewoundBy(rewoundRanges(all))
  const compaction = compactionInForce(all, rewound)
  const events = compaction ? all.filter((e) => e.seq >= compaction.keep && e.seq !== compaction.seq) : all
  return { rewound, compaction, events }
}

/**
 * The `history/compact` in force (§7): the last valid one that no rewind drops (a rewind whose
 * range holds a compaction's seq undoes it). Exported so that the framework adapters' views
 * (`toAiSdkMessages`, `JsonlSession.getItems`) select it by this same rule.
 */
export function compactionInForce(
  events: readonly SessionEvent[],
  rewound: (seq: number) => boolean,
): { seq: number; keep: number; summary: JsonValue } | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!
    if (e.type !== 'history/compact' || rewound(e.seq)) continue
    const keep = compactionKeep(e)
    if (keep !== undefined) return { seq: e.seq, keep, summary: (asObject(e.data)?.summary ?? '') as JsonValue }
  }
  return undefined
}
