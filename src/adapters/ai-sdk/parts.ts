// The pure mapping between AI SDK 6 content parts and the log's content blocks. Parts the
// vocabulary knows (text, reasoning, a tool call the caller runs) become its blocks; every other
// part is stored verbatim as a block of its own `type`, except a provider-executed tool call:
// stored as a `tool-call` block it would open a call that repair and history expect the host to
// answer, so it is wrapped whole in an `ai-sdk/part` block instead.
import type { AssistantContent, ToolResultPart, UserContent } from 'ai'
import { asObject } from '../../session/as-object.js'
import type { JsonValue } from '../../session/schema.js'
import { type JsonObject, parseArguments, toJson, without } from './json.js'

/** Block type holding an AI SDK part whose meaning the log's vocabulary would change. */
export const WRAPPED_PART = 'ai-sdk/part'

type AssistantPart = Exclude<AssistantContent, string>[number]
type UserPart = Exclude<UserContent, string>[number]
type ToolOutput = ToolResultPart['output']

/** One AI SDK content part (user or assistant) as a log content block. */
export function partToBlock(part: AssistantPart | UserPart): JsonObject {
  const p = part as unknown as Record<string, unknown>
  if (part.type === 'tool-call') {
    if (part.providerExecuted === true) return { type: WRAPPED_PART, part: toJson(part) }
    return {
      type: 'tool-call',
      callId: part.toolCallId,
      name: part.toolName,
      arguments: part.input === undefined ? {} : toJson(part.input),
      ...without(p, ['type', 'toolCallId', 'toolName', 'input']),
    }
  }
  return toJson(part) as JsonObject
}

const USER_PART_TYPES = new Set(['text', 'image', 'file'])
const ASSISTANT_PART_TYPES = new Set(['text', 'reasoning', 'file', 'tool-result', 'tool-approval-request'])

/** A log content block as an AI SDK part of a message of `role`; undefined when it has no such form. */
export function blockToPart(block: unknown, role: 'user' | 'assistant'): AssistantPart | UserPart | undefined {
  const b = asObject(block)
  if (!b || typeof b.type !== 'string') return undefined
  if (b.type === 'tool-call') {
    if (role !== 'assistant' || typeof b.callId !== 'string' || typeof b.name !== 'string') return undefined
    const rest = without(b, ['type', 'callId', 'name', 'arguments'])
    return { type: 'tool-call', toolCallId: b.callId, toolName: b.name, input: parseArguments(b.arguments), ...rest }
  }
  if (b.type === WRAPPED_PART) {
    const part = asObject(b.part)
    return role === 'assistant' && typeof part?.type === 'string' ? (part as unknown as AssistantPart) : undefined
  }
  const known = role === 'user' ? USER_PART_TYPES : ASSISTANT_PART_TYPES
  if (!known.has(b.type)) return undefined
  if ((b.type === 'text' || b.type === 'reasoning') && typeof b.text !== 'string') return undefined
  return b as unknown as AssistantPart | UserPart
}

/** What a `tool/result` event holds for an AI SDK tool output. */
export interface StoredOutput {
  content: JsonValue[]
  isError?: true
  error?: { name: string; code: string }
}

// Total: a value JSON cannot express (a BigInt, a cycle) must not make the step's record throw.
const stringify = (v: unknown): string => {
  if (typeof v === 'string') return v
  try {
    return JSON.stringify(v) ?? 'null'
  } catch {
    return String(v)
  }
}

/**
 * An AI SDK tool output as `tool/result` content: text as text, JSON as its JSON text, error
 * outputs with `isError`, a denied execution as an error saying so, multi-part content part by
 * part (text parts as text blocks, media parts verbatim).
 */
export function outputToStored(output: ToolOutput): StoredOutput {
  switch (output.type) {
    case 'text':
      return { content: [{ type: 'text', text: output.value }] }
    case 'json':
      return { content: [{ type: 'text', text: stringify(output.value) }] }
    case 'error-text':
      return { content: [{ type: 'text', text: output.value }], isError: true }
    case 'error-json':
      return { content: [{ type: 'text', text: stringify(output.value) }], isError: true }
    case 'execution-denied':
      return {
        content: [{ type: 'text', text: output.reason ?? 'Tool execution denied.' }],
        isError: true,
        error: { name: 'ExecutionDeniedError', code: 'execution-denied' },
      }
    case 'content':
      return { content: output.value.map((part) => toJson(part)) }
    default:
      return { content: [{ type: 'text', text: stringify(output) }] }
  }
}

type ContentValue = Extract<ToolOutput, { type: 'content' }>['value']

/**
 * `tool/result` content as the AI SDK output the model sees: `error-text` when it is an error,
 * `text` when it holds only text (blocks joined by a newline), otherwise `content` with its text
 * blocks and its media blocks verbatim (blocks with no AI SDK form are left out).
 */
export function storedToOutput(content: unknown, isError: boolean): ToolOutput {
  const blocks = Array.isArray(content) ? content.map((b) => asObject(b)).filter((b) => b !== undefined) : []
  const texts = blocks.filter((b) => b.type === 'text' && typeof b.text === 'string')
  const value = typeof content === 'string' ? content : texts.map((b) => b.text as string).join('\n')
  if (isError) return { type: 'error-text', value }
  if (typeof content === 'string' || texts.length === blocks.length) return { type: 'text', value }
  const parts = blocks.filter((b) => typeof b.type === 'string' && (b.type !== 'text' || typeof b.text === 'string'))
  return { type: 'content', value: parts as unknown as ContentValue }
}
