import type { AgentInputItem } from '@openai/agents'
import { asObject, type JsonObject, setField } from '../../session/as-object.js'
import type { JsonValue } from '../../session/schema.js'

/**
 * How the adapter reads one Agents SDK item. Only messages, function calls, their results and
 * reasoning have a place in the session vocabulary; every other item (hosted, computer, shell,
 * apply-patch and tool-search calls, compaction, unknown items) is kept verbatim only.
 */
export type ItemKind =
  | { kind: 'user' | 'system' | 'assistant'; item: JsonObject }
  | { kind: 'call'; item: JsonObject; callId: string; name: string }
  | { kind: 'result'; item: JsonObject; callId: string }
  | { kind: 'reasoning'; item: JsonObject }
  | { kind: 'other'; item: JsonObject; output: boolean; result: boolean }

// Items the model produces (they start a new step after tool results) and items that answer them.
const OTHER_OUTPUTS = new Set([
  'hosted_tool_call',
  'computer_call',
  'shell_call',
  'apply_patch_call',
  'tool_search_call',
  'program',
])
const OTHER_RESULTS = new Set([
  'computer_call_result',
  'shell_call_output',
  'apply_patch_call_output',
  'tool_search_output',
  'program_output',
])

export function classifyItem(value: AgentInputItem | unknown): ItemKind | undefined {
  const item = asObject(value)
  if (!item) return undefined
  const type = item.type
  if (type === undefined || type === 'message') {
    if (item.role === 'user' || item.role === 'system' || item.role === 'assistant') {
      return { kind: item.role, item }
    }
  }
  if (type === 'function_call' && typeof item.callId === 'string' && typeof item.name === 'string') {
    return { kind: 'call', item, callId: item.callId, name: item.name }
  }
  if (type === 'function_call_result' && typeof item.callId === 'string') {
    return { kind: 'result', item, callId: item.callId }
  }
  if (type === 'reasoning') return { kind: 'reasoning', item }
  const name = typeof type === 'string' ? type : ''
  return { kind: 'other', item, output: OTHER_OUTPUTS.has(name), result: OTHER_RESULTS.has(name) }
}

/** True for items the model produced; the first one after tool results starts a new step. */
export function isModelOutput(k: ItemKind): boolean {
  return k.kind === 'assistant' || k.kind === 'call' || k.kind === 'reasoning' || (k.kind === 'other' && k.output)
}

/** True for items that answer a call. */
export function isToolResult(k: ItemKind): boolean {
  return k.kind === 'result' || (k.kind === 'other' && k.result)
}

type Block = { [key: string]: JsonValue }

// Parts the vocabulary knows become its blocks; any other part with a string `type` is a block
// as it is, and a part without one is wrapped so that every block keeps a string `type`.
function block(part: unknown, textType: string, as: 'text' | 'reasoning' = 'text'): Block {
  const p = asObject(part)
  if (p && p.type === textType && typeof p.text === 'string') return { type: as, text: p.text }
  if (p && typeof p.type === 'string') return p as Block
  return { type: 'unknown', value: (part ?? null) as JsonValue }
}

export function userContent(content: unknown): JsonValue {
  if (typeof content === 'string') return content
  return Array.isArray(content) ? content.map((p) => block(p, 'input_text')) : []
}

export function assistantContent(content: unknown): Block[] {
  return Array.isArray(content) ? content.map((p) => block(p, 'output_text')) : []
}

export function reasoningContent(content: unknown): Block[] {
  return Array.isArray(content) ? content.map((p) => block(p, 'input_text', 'reasoning')) : []
}

export function resultContent(output: unknown): Block[] {
  if (typeof output === 'string') return [{ type: 'text', text: output }]
  if (Array.isArray(output)) return output.map((p) => block(p, 'input_text'))
  if (asObject(output)?.type === 'text') return [block(output, 'text')]
  return [block(output, '')]
}

/** Call arguments as JSON when they parse, the string as it is otherwise. */
export function parseArguments(args: unknown): JsonValue {
  if (typeof args !== 'string') return (args ?? null) as JsonValue
  try {
    return JSON.parse(args) as JsonValue
  } catch {
    return args
  }
}

/** The text of a list of blocks (what a result synthesized from the vocabulary carries). */
export function blocksText(content: unknown): string {
  if (!Array.isArray(content)) return ''
  return content
    .map((b) => asObject(b))
    .filter((b): b is JsonObject => b?.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text as string)
    .join('\n')
}

/** A key equal for deep-equal JSON values whatever their key order; undefined if not JSON. */
export function itemKey(value: unknown): string | undefined {
  try {
    return JSON.stringify(value, (_k, v: unknown) => {
      const o = asObject(v)
      if (!o) return v
      const sorted: JsonObject = {}
      for (const k of Object.keys(o).sort()) setField(sorted, k, o[k])
      return sorted
    })
  } catch {
    return undefined
  }
}
