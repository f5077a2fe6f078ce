import type { SessionEvent } from '../index.js'
import { ellipsis, feedJson, feedString, FoldedLine, type Sink } from './bounded-text.js'
import { codeSpan, fence, messageBlock } from './markdown-blocks.js'

// Kept in step with src/adapters/claude-agent-sdk/entry-events.ts (the CLI never imports an adapter).
const ENTRY_EVENT = 'claude/entry'
const ENTRY_FIELD = 'claudeEntry'

type Obj = Record<string, unknown>
const asObj = (v: unknown): Obj | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)

/** A value (a string as it is, else its JSON) on one line, trimmed, at most `max` characters; only its start is read. */
function flat(value: unknown, max: number): string {
  return flatOf((sink) => (typeof value === 'string' ? feedString(value, sink) : feedJson(value, sink)), max)
}

function flatOf(feed: (sink: Sink) => unknown, max: number): string {
  // Two more than `max`: trimming takes at most a space off each end.
  const line = new FoldedLine(max + 2)
  feed(line.add)
  return ellipsis(line.full ? line.text.trimStart() : line.text.trim(), max)
}

/** A tool_result's content as text: strings as they are, text blocks joined, other blocks named. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return content === undefined ? '' : flat(content, 200)
  return content.map((b) => (asObj(b)?.type === 'text' ? String(asObj(b)?.text ?? '') : `[${String(asObj(b)?.type ?? '?')}]`)).join('\n')
}

/** Feeds `sink` what `resultText(content)` is, until it is full. */
function feedResult(content: unknown, sink: Sink): void {
  if (typeof content === 'string') return void feedString(content, sink)
  if (!Array.isArray(content)) return void sink(content === undefined ? '' : flat(content, 200))
  for (let i = 0; i < content.length; i++) {
    const b = asObj(content[i])
    if (i > 0 && sink('\n')) return
    if (b?.type === 'text' ? feedString(String(b.text ?? ''), sink) : sink(`[${String(b?.type ?? '?')}]`)) return
  }
}

interface Part {
  kind: 'text' | 'call' | 'result'
  /** The text of a text part; the input of a call; the content of a result. */
  value: unknown
  id?: string
  name?: string
  isError?: boolean
}

function partsOf(content: unknown): Part[] {
  if (typeof content === 'string') return [{ kind: 'text', value: content }]
  if (!Array.isArray(content)) return []
  return content.map((block): Part => {
    const b = asObj(block) ?? {}
    switch (b.type) {
      case 'text':
        return { kind: 'text', value: String(b.text ?? '') }
      case 'thinking':
        return { kind: 'text', value: '(thinking)' }
      case 'tool_use':
        return { kind: 'call', value: b.input ?? null, id: String(b.id), name: String(b.name) }
      case 'tool_result':
        return { kind: 'result', value: b.content, id: String(b.tool_use_id), isError: b.is_error === true }
      default:
        return { kind: 'text', value: `[${String(b.type ?? '?')}]` }
    }
  })
}

/** What an entry that carries a message says, or undefined for the SDK's bookkeeping entries. */
function describeEntry(entry: Obj): { role: string; parts: Part[] } | undefined {
  const message = asObj(entry.message)
  if ((entry.type === 'user' || entry.type === 'assistant') && message) return { role: entry.type, parts: partsOf(message.content) }
  if (entry.type === 'system' && typeof entry.content === 'string') {
    return { role: `system${typeof entry.subtype === 'string' ? ` (${entry.subtype})` : ''}`, parts: [{ kind: 'text', value: entry.content }] }
  }
  if (entry.type === 'summary' && typeof entry.summary === 'string') return { role: 'summary', parts: [{ kind: 'text', value: entry.summary }] }
  return undefined
}

/** A few words on a bookkeeping entry: what it marks, never its whole payload. */
function bookkeepingDetail(entry: Obj): string {
  const detail =
    entry.type === 'attachment' ? asObj(entry.attachment)?.type
    : entry.type === 'queue-operation' ? entry.operation
    : entry.type === 'last-prompt' ? entry.lastPrompt
    : entry.type === 'mode' ? entry.mode
    : entry.type === 'cost-state' && typeof entry.totalCostUSD === 'number' ? `$${entry.totalCostUSD.toFixed(4)}`
    : (entry.customTitle ?? entry.aiTitle ?? entry.title ?? entry.tag)
  return typeof detail === 'string' && detail ? ` ${flat(detail, 60)}` : ''
}

/**
 * How `show` and `export --format md` print an event that the claude-agent-sdk adapter writes and the 2.1
 * vocabulary does not cover: a line of text and a Markdown paragraph, or undefined for any other
 * event (the generic rendering then applies). Pure: it never imports the framework.
 *
 * A `claude/entry` that carries a message (several tool results in one entry, results mixed
 * with text, system and summary entries) is printed as the message it is; the SDK's
 * bookkeeping entries (attachments, queue operations, titles, mode and cost markers) get one
 * short line in `show` and nothing in Markdown.
 */
export function renderClaudeAgentSdkEvent(event: SessionEvent): { text: string; markdown: string } | undefined {
  if (event.type !== ENTRY_EVENT) return undefined
  const entry = asObj((event as Obj)[ENTRY_FIELD])
  if (!entry) return undefined
  const described = describeEntry(entry)
  if (!described) return { text: `· ${typeof entry.type === 'string' ? entry.type : 'entry'}${bookkeepingDetail(entry)}`, markdown: '' }
  const { role, parts } = described
  const texts = parts.filter((p) => p.kind === 'text').map((p) => p.value as string)
  // Each made when asked for (`show` wants the text, `export` the Markdown): a call's input and
  // a result's content are written whole only in Markdown, and cut to a line in the text.
  return {
    get text() {
      const lines = [`${role}${texts.length ? `: ${texts.join('\n')}` : ''}`]
      for (const p of parts) {
        if (p.kind === 'call') lines.push(`  → ${p.name} ${flatOf((sink) => feedJson(p.value, sink), 80)} [${p.id}]`)
        else if (p.kind === 'result') lines.push(`  ← [${p.id}] ${p.isError ? 'error: ' : ''}${flatOf((sink) => feedResult(p.value, sink), 100)}`)
      }
      return lines.join('\n')
    },
    get markdown() {
      const md: string[] = []
      if (texts.length) md.push(messageBlock(flat(role[0]!.toUpperCase() + role.slice(1), 60), texts.join('\n')))
      for (const p of parts) {
        if (p.kind === 'call') md.push(`Tool call ${codeSpan(flat(p.name, 200))} (${flat(p.id, 200)}):\n\n${fence(JSON.stringify(p.value))}`)
        else if (p.kind === 'result') md.push(`Result of ${flat(p.id, 200)}${p.isError ? ' (error)' : ''}:\n\n${fence(resultText(p.value))}`)
      }
      return md.join('\n\n')
    },
  }
}
