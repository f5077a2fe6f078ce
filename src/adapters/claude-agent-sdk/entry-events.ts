import { isPlainObject } from '../../session/json-check.js'
import type { JsonValue, SessionEvent } from '../../index.js'
import { SessionPersistenceError } from '../../index.js'

/** The top-level event field that holds the SDK's entry verbatim: what `load` gives back. */
export const ENTRY_FIELD = 'claudeEntry'
/** The event type of an entry that is not a message, a tool use or a single tool result. */
export const ENTRY_EVENT = 'claude/entry'

type Obj = Record<string, unknown>
const asObj = (v: unknown): Obj | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)

/** What an entry becomes: an event type of the 2.1 vocabulary (or `claude/entry`) and its data. */
export interface EntryView {
  type: 'user/message' | 'assistant/message' | 'tool/result' | typeof ENTRY_EVENT
  data: JsonValue
  ignorable?: true
}

/** Anthropic content block → ContentBlock of the 2.1 vocabulary; unknown blocks as they are. */
function assistantBlock(block: unknown): unknown {
  const b = asObj(block)
  if (!b) return block
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? { type: 'text', text: b.text } : block
    case 'thinking':
      return typeof b.thinking === 'string' ? { type: 'reasoning', text: b.thinking } : block
    case 'tool_use':
      return typeof b.id === 'string' && typeof b.name === 'string' ? { type: 'tool-call', callId: b.id, name: b.name, arguments: b.input ?? null } : block
    default:
      return block
  }
}

function userBlock(block: unknown): unknown {
  const b = asObj(block)
  return b?.type === 'text' && typeof b.text === 'string' ? { type: 'text', text: b.text } : block
}

/** A tool_result block's `content` (a string or blocks) as ContentBlocks. */
function resultContent(content: unknown): unknown[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  if (Array.isArray(content)) return content.map(userBlock)
  return content === undefined || content === null ? [] : [{ type: 'text', text: JSON.stringify(content) }]
}

/**
 * How an entry reads in the session vocabulary (docs/contract.md §2.1), so that `show`, `export`
 * and `toModelHistory` work on a store's sessions. Pure; the entry itself is stored beside it.
 * - a `user` entry with text (a string or text/image blocks, no tool result): `user/message`;
 * - a `user` entry that holds exactly one `tool_result` block and nothing else: `tool/result`;
 * - an `assistant` entry: `assistant/message` (text, `thinking` as reasoning, `tool_use` as
 *   `tool-call` blocks, other blocks as they are);
 * - anything else (several tool results in one entry, results mixed with text, attachments,
 *   summaries, titles, mode and cost markers, entry types of newer SDKs): `claude/entry`,
 *   ignorable, with `{entryType}`.
 * No turn or step structure is written (`turn` and `step` are 0): the store does not see turns.
 */
export function viewOf(entry: Obj): EntryView {
  const type = entry.type
  const message = asObj(entry.message)
  if (type === 'user' && message) {
    const content = message.content
    if (typeof content === 'string') return { type: 'user/message', data: { content } }
    if (Array.isArray(content) && content.length > 0) {
      let results = 0
      for (const block of content) if (asObj(block)?.type === 'tool_result') results++
      if (results === 0) return { type: 'user/message', data: { content: content.map(userBlock) as JsonValue } }
      const only = results === 1 && content.length === 1 ? asObj(content[0]) : undefined
      if (only && typeof only.tool_use_id === 'string') {
        return {
          type: 'tool/result',
          data:
            only.is_error === true
              ? { turn: 0, step: 0, callId: only.tool_use_id, content: resultContent(only.content) as JsonValue, isError: true }
              : { turn: 0, step: 0, callId: only.tool_use_id, content: resultContent(only.content) as JsonValue },
        }
      }
    }
  } else if (type === 'assistant' && message) {
    const content = message.content
    if (typeof content === 'string') return { type: 'assistant/message', data: { turn: 0, step: 0, content: [{ type: 'text', text: content }] } }
    if (Array.isArray(content)) return { type: 'assistant/message', data: { turn: 0, step: 0, content: content.map(assistantBlock) as JsonValue } }
  }
  return { type: ENTRY_EVENT, data: { entryType: typeof type === 'string' ? type : null }, ignorable: true }
}

/**
 * The event that stores `entry` at `seq`. The entry goes before `data`, so that content that
 * is not plain JSON is reported by the backend at its path inside the entry (`claudeEntry.…`).
 */
export function entryEvent(entry: Obj, seq: number, time: number): SessionEvent {
  const view = viewOf(entry)
  // Literal keys (`ENTRY_FIELD` spelled out), one shape each: no computed key, no added field.
  const event = view.ignorable
    ? { seq, type: view.type, time, claudeEntry: entry, data: view.data, ignorable: true }
    : { seq, type: view.type, time, claudeEntry: entry, data: view.data }
  return event as unknown as SessionEvent
}

/** The entry an event stores, or undefined for events a store did not write (closers, markers). */
export function entryOf(event: SessionEvent): Obj | undefined {
  return asObj((event as Record<string, unknown>)[ENTRY_FIELD])
}

/** Refuses an entry that is not a JSON object (`E_INVALID_EVENT`), naming its index in the batch. */
export function assertEntry(entry: unknown, index: number, sessionId: string): asserts entry is Obj {
  if (!isPlainObject(entry)) throw entryError(entry, index, sessionId)
}


/** The refusal of an entry that is not a plain object (`E_INVALID_EVENT`). */
export function entryError(entry: unknown, index: number, sessionId: string): SessionPersistenceError {
  const what = entry === null ? 'null' : Array.isArray(entry) ? 'an array' : typeof entry === 'object' ? `a ${(entry as object).constructor?.name ?? 'non-plain'} object` : `a ${typeof entry}`
  return new SessionPersistenceError('E_INVALID_EVENT', `append: entry ${index} of the batch must be a plain JSON object, got ${what}; nothing was written`, { sessionId })
}

