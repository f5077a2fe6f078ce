import type { JsonValue, SessionEvent } from './core/schema.js'

/** Text of the in-memory result of a call the log never answered (SPEC 7). */
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
  /** Present (true) on a result this function made up for a call the log never answered. */
  synthetic?: true
}

export interface ModelHistory {
  messages: ModelMessage[]
  /** The `header` of the last `request/header` event, if any. */
  requestHeader: JsonValue | undefined
}

type Obj = Record<string, unknown>
const asObject = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined

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
 * The conversation a model provider needs (SPEC 7): one message per system, user and assistant
 * message and per tool result, in log order; chunks and every other type produce none. Every
 * tool call of an assistant message gets exactly one tool message: a call the log never
 * answered gets a synthetic error result right after the other results of its message.
 */
export function toModelHistory(events: readonly SessionEvent[]): ModelHistory {
  const answered = new Set<string>()
  for (const e of events) {
    const callId = e.type === 'tool/result' ? asObject(e.data)?.callId : undefined
    if (typeof callId === 'string') answered.add(callId)
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
  for (const e of events) {
    if (e.type === 'request/header') {
      const header = asObject(e.data)?.header
      if (header !== undefined) requestHeader = header as JsonValue
      continue
    }
    const role = ROLE_OF[e.type]
    if (!role) continue
    const data = asObject(e.data)
    if (role !== 'tool') closeUnanswered()
    const message: ModelMessage = { role, seq: e.seq, content: (data?.content ?? null) as JsonValue }
    if (role === 'tool') {
      if (typeof data?.callId === 'string') message.callId = data.callId
      if (typeof data?.isError === 'boolean') message.isError = data.isError
    }
    messages.push(message)
    if (role === 'assistant') unanswered = toolCallIds(data?.content).filter((id) => !answered.has(id))
  }
  closeUnanswered()
  return { messages, requestHeader }
}
