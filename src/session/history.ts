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
 * and assistant message, in log order, each followed by the results of its tool calls; chunks and
 * every other type produce none. Messages of events a `history/rewind` took out are left out
 * (§2.1).
 *
 * The result is balanced for a provider whatever the log holds (a rewind's cut, a result
 * recorded late, twice, or for a call no event holds): every tool call of a shown assistant
 * message gets exactly one tool message, right after its message, and no tool message lacks its
 * call. A result answers the latest call with its id recorded before it (`pairResults`); the
 * first result of a call is shown, in the order the results were recorded, wherever the log put
 * it; a call with none gets a synthetic error result after them. A result whose call is not shown
 * (rewound, before a compaction's `firstKeptSeq`, or never recorded) is left out.
 *
 * A `tool/call` that no assistant message of the log holds (a recorder writes the call before
 * the step's message, and a crash in the tool left only the call) is shown as a synthetic
 * assistant message holding that `tool-call` block, at the call's place; calls recorded one
 * after another share one such message. So the repair's result always has its call.
 */
export function toModelHistory(all: readonly SessionEvent[]): ModelHistory {
  const { rewound, compaction, events } = historyWindow(all)
  let requestHeader: JsonValue | undefined
  for (const e of all) {
    if (e.type !== 'request/header') continue
    const header = asObject(e.data)?.header
    if (header !== undefined) requestHeader = header as JsonValue
  }
  const messages: ModelMessage[] = []
  if (compaction) messages.push({ role: 'user', seq: compaction.seq, compaction: true, content: compaction.summary })
  for (const entry of pairResults(events, rewound)) {
    messages.push(entry.message)
    if (!entry.calls) continue
    // The results in the order they were recorded, then a synthetic one per call left unanswered.
    for (const result of entry.results!) messages.push(result)
    if (entry.results!.length === entry.calls.length) continue
    for (const call of entry.calls) {
      if (call.answered) continue
      messages.push({
        role: 'tool',
        callId: call.callId,
        isError: true,
        synthetic: true,
        content: [{ type: 'text', text: UNANSWERED_TOOL_TEXT }],
      })
    }
  }
  return { messages, requestHeader }
}

/** A tool call of a shown assistant message, and whether a result answers it. */
interface ShownCall {
  callId: string
  entry: HistoryEntry
  answered: boolean
}

/**
 * A shown system, user or assistant message; an assistant one holding tool calls with its calls
 * and the results that answer them, in the order they were recorded.
 */
interface HistoryEntry {
  message: ModelMessage
  calls?: ShownCall[]
  results?: ModelMessage[]
}

/**
 * The shown messages of a history window in log order, each assistant message (or synthetic one
 * for lone `tool/call`s) with its calls and the result that answers each. A shown `tool/result`
 * answers the latest call with its `callId` recorded before it, in an assistant message or a lone
 * `tool/call`, shown or rewound; it is left out when that call was rewound, is already answered
 * (the first result recorded wins), or does not exist. So a `callId` a later message uses again
 * is a new call, answered only by results recorded after that message.
 */
function pairResults(events: readonly SessionEvent[], rewound: (seq: number) => boolean): HistoryEntry[] {
  const messageCalls = new Set<string>() // calls held by any assistant message, shown or not
  for (const e of events) {
    if (e.type === 'assistant/message') for (const id of toolCallIds(asObject(e.data)?.content)) messageCalls.add(id)
  }
  const entries: HistoryEntry[] = []
  const latest = new Map<string, ShownCall | null>() // callId -> its latest call so far (null: rewound)
  let orphanCalls: HistoryEntry | undefined // the synthetic assistant message still open to more calls
  for (const e of events) {
    const data = asObject(e.data)
    const hidden = rewound(e.seq)
    if (e.type === 'tool/call') {
      const callId = data?.callId
      // A call an assistant message holds is shown there; a lone one, here.
      if (typeof callId !== 'string' || messageCalls.has(callId)) continue
      if (hidden) {
        latest.set(callId, null)
        continue
      }
      if (orphanCalls?.calls!.some((c) => c.callId === callId)) continue // the same call recorded again
      const block = { type: 'tool-call', callId, name: String(data?.name ?? ''), arguments: (data?.arguments ?? null) as JsonValue }
      if (orphanCalls) {
        ;(orphanCalls.message.content as JsonValue[]).push(block)
      } else {
        orphanCalls = { message: { role: 'assistant', synthetic: true, content: [block] }, calls: [], results: [] }
        entries.push(orphanCalls)
      }
      const call: ShownCall = { callId, entry: orphanCalls, answered: false }
      orphanCalls.calls!.push(call)
      latest.set(callId, call)
      continue
    }
    const role = ROLE_OF[e.type]
    if (!role) continue
    if (role === 'assistant' && hidden) {
      for (const id of toolCallIds(data?.content)) latest.set(id, null)
      continue
    }
    if (hidden) continue
    if (role === 'tool') {
      const callId = data?.callId
      const call = typeof callId === 'string' ? latest.get(callId) : undefined
      if (!call || call.answered) continue // no shown call before it, or a second result
      const result: ModelMessage = { role, seq: e.seq, content: (data?.content ?? null) as JsonValue, callId: call.callId }
      if (typeof data?.isError === 'boolean') result.isError = data.isError
      call.answered = true
      call.entry.results!.push(result)
      orphanCalls = undefined
      continue
    }
    orphanCalls = undefined
    const entry: HistoryEntry = { message: { role, seq: e.seq, content: (data?.content ?? null) as JsonValue } }
    const callIds = role === 'assistant' ? toolCallIds(data?.content) : []
    if (callIds.length > 0) {
      entry.calls = []
      entry.results = []
      for (const callId of callIds) {
        const call: ShownCall = { callId, entry, answered: false }
        entry.calls.push(call)
        latest.set(callId, call)
      }
    }
    entries.push(entry)
  }
  return entries
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
