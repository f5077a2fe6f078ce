import type { ModelMessage } from 'ai'
import type { JsonValue } from '../../session/schema.js'
import { type JsonObject, toJson, toJsonOpt } from './json.js'
import { outputToStored, partToBlock } from './parts.js'

/** An event before the session gives it a seq and a time. */
export interface EventDraft {
  type: string
  data: JsonObject
  ignorable?: true
}

/** Event type of an AI SDK tool-message part the vocabulary has no place for (an approval response). */
export const TOOL_PART_EVENT = 'ai-sdk/tool-part'

/** Where in the session a message is recorded. */
export interface MessagePlace {
  turn: number
  step: number
}

const withOptions = (data: JsonObject, providerOptions: unknown): JsonObject => {
  const options = toJsonOpt(providerOptions)
  return options === undefined ? data : { ...data, providerOptions: options }
}

/**
 * The events that record one AI SDK `ModelMessage` (the inverse of `toAiSdkMessages`): a system,
 * user or assistant message becomes one `system/message`, `user/message` or `assistant/message`;
 * a tool message one `tool/result` per `tool-result` part (its `toolName` kept as `name`), and
 * one ignorable `ai-sdk/tool-part` event per other part, stored verbatim.
 */
export function messageToDrafts(message: ModelMessage, place: MessagePlace): EventDraft[] {
  switch (message.role) {
    case 'system':
      return [{ type: 'system/message', data: withOptions({ content: message.content }, message.providerOptions) }]
    case 'user': {
      const content: JsonValue =
        typeof message.content === 'string' ? message.content : message.content.map((p) => partToBlock(p))
      return [{ type: 'user/message', data: withOptions({ content }, message.providerOptions) }]
    }
    case 'assistant': {
      const content: JsonValue[] =
        typeof message.content === 'string'
          ? [{ type: 'text', text: message.content }]
          : message.content.map((p) => partToBlock(p))
      return [{ type: 'assistant/message', data: withOptions({ ...place, content }, message.providerOptions) }]
    }
    case 'tool':
      return message.content.map((part): EventDraft => {
        if (part.type !== 'tool-result') {
          return { type: TOOL_PART_EVENT, data: { ...place, part: toJson(part) }, ignorable: true }
        }
        const stored = outputToStored(part.output)
        const data: JsonObject = { ...place, callId: part.toolCallId, name: part.toolName, content: stored.content }
        if (stored.isError) data.isError = true
        if (stored.error) data.error = stored.error
        return { type: 'tool/result', data: withOptions(data, part.providerOptions) }
      })
    default:
      return []
  }
}

/** `messageToDrafts` over a list, in order. */
export function messagesToDrafts(messages: readonly ModelMessage[], place: MessagePlace): EventDraft[] {
  return messages.flatMap((m) => messageToDrafts(m, place))
}
