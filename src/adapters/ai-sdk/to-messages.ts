import type { AssistantModelMessage, ModelMessage, ToolContent, ToolModelMessage } from 'ai'
import { asObject } from '../../session/as-object.js'
import type { SessionEvent } from '../../session/schema.js'
import { historyWindow, UNANSWERED_TOOL_TEXT } from '../../session/history.js'
import { TOOL_PART_EVENT } from './from-messages.js'
import { parseArguments } from './json.js'
import { blockToPart, storedToOutput } from './parts.js'

type AssistantPart = Exclude<AssistantModelMessage['content'], string>[number]
type UserParts = Exclude<Extract<ModelMessage, { role: 'user' }>['content'], string>

const textOf = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content
          .map((b) => asObject(b))
          .filter((b) => b?.type === 'text' && typeof b.text === 'string')
          .map((b) => b!.text as string)
          .join('\n')
      : ''

const options = (data: Record<string, unknown> | undefined) =>
  asObject(data?.providerOptions) ? { providerOptions: data!.providerOptions as never } : {}

/**
 * A session's conversation as AI SDK 6 `ModelMessage`s, ready for `generateText` / `streamText`
 * (docs/contract.md §14). System, user and assistant messages map one to one (text, reasoning
 * and `tool-call` parts, the call's arguments parsed); each `tool/result` becomes a `tool`
 * message whose output is `text`, or `error-text` when it is an error. Messages a
 * `history/rewind` took out are left out.
 *
 * The result is always balanced, so the AI SDK never throws `AI_MissingToolResultsError` on a
 * resumed session: a call recorded only by its `tool/call` event (the run stopped before its
 * step's assistant message was written) gets an assistant message of its own; every call the log
 * never answered gets an `error-text` result saying so, right after the other results of its
 * message; and a result whose call is not in the history (rewound, or answered already) is left
 * out, since a provider refuses a result for a call it never saw.
 *
 * `history/compact` is honoured as `toModelHistory` honours it (docs/contract.md §7): with a
 * compaction in force, the history starts with its summary as a user message (none for an empty
 * summary, where `toModelHistory` has one with empty content), followed by the
 * messages of the events from its `firstKeptSeq` on; a result whose call lies before
 * `firstKeptSeq` went with the summary. So the history of a load from the last compaction (its
 * events from `firstSeq`) is the history of the whole log.
 */
export function toAiSdkMessages(all: readonly SessionEvent[]): ModelMessage[] {
  // A result whose call is before the compaction's firstKeptSeq finds no open call below.
  const { rewound, compaction, events } = historyWindow(all)
  const shown = events.filter((e) => !rewound(e.seq))
  // A call id names one call within a step of a turn only: providers reuse ids (local servers
  // send `call_0` in every response). So calls are keyed by turn (counted by `turn/start`), step
  // and id, and a reused id in a later step or turn is a call of its own.
  let turns = 0
  const keyOf = (e: SessionEvent, callId: string) => {
    const step = asObject(e.data)?.step
    return `${turns}/${typeof step === 'number' ? step : ''}/${callId}`
  }
  // Calls an assistant message carries; a `tool/call` of one of these adds nothing.
  const inMessages = new Set<string>()
  const names = new Map<string, string>()
  for (const e of shown) {
    const data = asObject(e.data)
    if (e.type === 'turn/start') turns++
    else if (e.type === 'assistant/message' && Array.isArray(data?.content)) {
      for (const block of data.content) {
        const b = asObject(block)
        if (b?.type === 'tool-call' && typeof b.callId === 'string') {
          inMessages.add(keyOf(e, b.callId))
          if (typeof b.name === 'string') names.set(keyOf(e, b.callId), b.name)
        }
      }
    } else if (e.type === 'tool/call' && typeof data?.callId === 'string' && typeof data.name === 'string') {
      if (!names.has(keyOf(e, data.callId))) names.set(keyOf(e, data.callId), data.name)
    }
  }
  turns = 0

  const out: ModelMessage[] = []
  const pending = new Map<string, { toolName: string; key: string }>() // open calls, in the order opened
  // The open calls by keyOf: a call goes to the model once, in the first message that makes it;
  // once answered, its id is free for a new call.
  const shownCalls = new Set<string>()
  let orphanMessage: AssistantModelMessage | undefined // the assistant message built from `tool/call` events
  const approvalFor = new Map<string, string>() // approvalId -> callId, from tool-approval-request parts
  const approved = new Set<string>() // calls whose approval response is in the history
  const closePending = ({ atEnd = false }: { atEnd?: boolean } = {}) => {
    const results: ModelMessage[] = []
    for (const [toolCallId, { toolName, key }] of pending) {
      shownCalls.delete(key)
      // A call whose approval was answered stays open at the end: the AI SDK runs it (or records
      // its denial) when it finds the approval response as the last message.
      if (atEnd && approved.has(toolCallId)) continue
      results.push(toolMessage([{ type: 'tool-result', toolCallId, toolName, output: { type: 'error-text', value: UNANSWERED_TOOL_TEXT } }]))
    }
    pending.clear()
    let at = out.length
    if (atEnd) while (at > 0 && isApprovalResponse(out[at - 1]!)) at-- // that response must stay last
    out.splice(at, 0, ...results)
  }
  const openCall = (callId: string, toolName: string, key: string) => pending.set(callId, { toolName, key })
  const push = (message: ModelMessage) => {
    if (message.role !== 'tool') closePending()
    out.push(message)
    orphanMessage = undefined
  }

  const summary = compaction && summaryMessage(compaction.summary)
  if (summary) out.push(summary)
  for (const e of shown) {
    const data = asObject(e.data)
    switch (e.type) {
      case 'turn/start':
        turns++
        break
      case 'system/message':
        push({ role: 'system', content: textOf(data?.content), ...options(data) })
        break
      case 'user/message': {
        const content = data?.content
        if (typeof content === 'string') push({ role: 'user', content, ...options(data) })
        else if (Array.isArray(content)) {
          const parts = content.map((b) => blockToPart(b, 'user')).filter((p) => p !== undefined) as UserParts
          push({ role: 'user', content: parts, ...options(data) })
        }
        break
      }
      case 'assistant/message': {
        const content = Array.isArray(data?.content) ? data.content : []
        const parts: AssistantPart[] = []
        for (const block of content) {
          const p = blockToPart(block, 'assistant') as AssistantPart | undefined
          if (!p) continue
          if (p.type === 'tool-call' && p.providerExecuted !== true) {
            if (shownCalls.has(keyOf(e, p.toolCallId))) continue
            shownCalls.add(keyOf(e, p.toolCallId))
          }
          if (p.type === 'tool-approval-request') approvalFor.set(p.approvalId, p.toolCallId)
          parts.push(p)
        }
        push({ role: 'assistant', content: parts, ...options(data) })
        for (const p of parts) if (p.type === 'tool-call' && p.providerExecuted !== true) openCall(p.toolCallId, p.toolName, keyOf(e, p.toolCallId))
        break
      }
      case 'tool/call': {
        const callId = data?.callId
        // Nothing to add either for a call shown and not answered yet: its approved run, say.
        if (typeof callId !== 'string' || inMessages.has(keyOf(e, callId)) || shownCalls.has(keyOf(e, callId)) || pending.has(callId)) break
        shownCalls.add(keyOf(e, callId))
        const part: AssistantPart = {
          type: 'tool-call',
          toolCallId: callId,
          toolName: names.get(keyOf(e, callId)) ?? 'unknown',
          input: parseArguments(data?.arguments),
        }
        // Calls dispatched together (nothing recorded between them) share one assistant message.
        if (orphanMessage && Array.isArray(orphanMessage.content) && out.at(-1) === orphanMessage) {
          orphanMessage.content.push(part)
        } else {
          push({ role: 'assistant', content: [part] })
          orphanMessage = out.at(-1) as AssistantModelMessage
        }
        openCall(callId, part.toolName, keyOf(e, callId))
        break
      }
      case 'tool/result': {
        const callId = data?.callId
        if (typeof callId !== 'string' || !pending.has(callId)) break
        const { toolName, key } = pending.get(callId)!
        pending.delete(callId)
        shownCalls.delete(key)
        const output = storedOutput(data)
        out.push(toolMessage([{ type: 'tool-result', toolCallId: callId, toolName, output, ...options(data) }]))
        break
      }
      case TOOL_PART_EVENT: {
        const part = asObject(data?.part)
        if (typeof part?.type !== 'string') break
        if (part.type === 'tool-approval-response' && typeof part.approvalId === 'string') {
          const callId = approvalFor.get(part.approvalId)
          if (callId === undefined) break // a response to a request not in the history: the AI SDK would refuse it
          approved.add(callId)
        }
        out.push(toolMessage([part as unknown as ToolContent[number]]))
        break
      }
    }
  }
  closePending({ atEnd: true })
  return out
}

/**
 * The summary of the compaction in force as the user message that opens the history: a string as
 * it is; blocks as user parts (text, image and file; blocks with no user-part form, such as
 * reasoning or tool calls, and text blocks with no text but blanks, are left out). None for a
 * summary with nothing left (`''`, blanks, no blocks): providers refuse a message, or a text
 * part, with no content, and an empty summary says nothing (the compaction still drops what it
 * summarised).
 */
function summaryMessage(summary: unknown): ModelMessage | undefined {
  if (typeof summary === 'string') return blank(summary) ? undefined : { role: 'user', content: summary }
  const blocks = Array.isArray(summary) ? summary : []
  const parts = blocks.map((b) => blockToPart(b, 'user')).filter((p) => p !== undefined && !(p.type === 'text' && blank(p.text))) as UserParts
  return parts.length === 0 ? undefined : { role: 'user', content: parts }
}

const blank = (text: string) => text.trim() === ''

const isApprovalResponse = (m: ModelMessage) =>
  m.role === 'tool' && m.content.length > 0 && m.content.every((p) => p.type === 'tool-approval-response')

function toolMessage(content: ToolContent): ToolModelMessage {
  return { role: 'tool', content }
}

function storedOutput(data: Record<string, unknown> | undefined) {
  return storedToOutput(data?.content, data?.isError === true)
}
