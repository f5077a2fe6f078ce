import type { SessionEvent } from '../index.js'
import { codeSpan, fence, messageBlock } from './markdown-blocks.js'

// Kept in step with src/adapters/claude-agent-sdk/entry-events.ts (the CLI never imports an adapter).
const ENTRY_EVENT = 'claude/entry'
const ENTRY_FIELD = 'claudeEntry'

type Obj = Record<string, unknown>
const asObj = (v: unknown): Obj | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)

function flat(value: unknown, max: number): string {
  const s = typeof value === 'string' ? value : (JSON.stringify(value) ?? '')
  const one = s.replace(/\s+/g, ' ').trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

/** A tool_result's content as text: strings as they are, text blocks joined, other blocks named. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return content === undefined ? '' : flat(content, 200)
  return content.map((b) => (asObj(b)?.type === 'text' ? String(asObj(b)?.text ?? '') : `[${String(asObj(b)?.type ?? '?')}]`)).join('\n')
}

interface Part {
  kind: 'text' | 'call' | 'result'
  text: string
  id?: string
  name?: string
  isError?: boolean
}

function partsOf(content: unknown): Part[] {
  if (typeof content === 'string') return [{ kind: 'text', text: content }]
  if (!Array.isArray(content)) return []
  return content.map((block): Part => {
    const b = asObj(block) ?? {}
    switch (b.type) {
      case 'text':
        return { kind: 'text', text: String(b.text ?? '') }
      case 'thinking':
        return { kind: 'text', text: '(thinking)' }
      case 'tool_use':
        return { kind: 'call', text: JSON.stringify(b.input ?? null), id: String(b.id), name: String(b.name) }
      case 'tool_result':
        return { kind: 'result', text: resultText(b.content), id: String(b.tool_use_id), isError: b.is_error === true }
      default:
        return { kind: 'text', text: `[${String(b.type ?? '?')}]` }
    }
  })
}

/** What an entry that carries a message says, or undefined for the SDK's bookkeeping entries. */
function describeEntry(entry: Obj): { role: string; parts: Part[] } | undefined {
  const message = asObj(entry.message)
  if ((entry.type === 'user' || entry.type === 'assistant') && message) return { role: entry.type, parts: partsOf(message.content) }
  if (entry.type === 'system' && typeof entry.content === 'string') {
    return { role: `system${typeof entry.subtype === 'string' ? ` (${entry.subtype})` : ''}`, parts: [{ kind: 'text', text: entry.content }] }
  }
  if (entry.type === 'summary' && typeof entry.summary === 'string') return { role: 'summary', parts: [{ kind: 'text', text: entry.summary }] }
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
  const lines: string[] = []
  const md: string[] = []
  const texts = described.parts.filter((p) => p.kind === 'text').map((p) => p.text)
  lines.push(`${described.role}${texts.length ? `: ${texts.join('\n')}` : ''}`)
  if (texts.length) md.push(messageBlock(flat(described.role[0]!.toUpperCase() + described.role.slice(1), 60), texts.join('\n')))
  for (const p of described.parts) {
    if (p.kind === 'call') {
      lines.push(`  → ${p.name} ${flat(p.text, 80)} [${p.id}]`)
      md.push(`Tool call ${codeSpan(flat(p.name, 200))} (${flat(p.id, 200)}):\n\n${fence(p.text)}`)
    } else if (p.kind === 'result') {
      lines.push(`  ← [${p.id}] ${p.isError ? 'error: ' : ''}${flat(p.text, 100)}`)
      md.push(`Result of ${flat(p.id, 200)}${p.isError ? ' (error)' : ''}:\n\n${fence(p.text)}`)
    }
  }
  return { text: lines.join('\n'), markdown: md.join('\n\n') }
}
