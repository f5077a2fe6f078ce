import type { LoadedSession } from '../persistence.js'
import type { JsonValue, SessionEvent } from '../session/schema.js'
import { INTERRUPTED_TOOL_TEXT } from '../session/closers.js'
import { asObject, type JsonObject } from '../session/as-object.js'
import { isRewoundBy, rewoundRanges } from '../session/history.js'
import { renderClaudeAgentSdkEvent } from './render-claude-agent-sdk.js'
import { renderLangGraphEvent } from './render-langgraph.js'

export interface Style {
  dim(s: string): string
  bold(s: string): string
  red(s: string): string
  yellow(s: string): string
  green(s: string): string
  cyan(s: string): string
}

/** ANSI styles on a terminal (and without NO_COLOR); plain text otherwise. */
export function makeStyle(enabled: boolean): Style {
  const wrap = (open: number, close: number) => (s: string) => (enabled ? `\u001b[${open}m${s}\u001b[${close}m` : s)
  return { dim: wrap(2, 22), bold: wrap(1, 22), red: wrap(31, 39), yellow: wrap(33, 39), green: wrap(32, 39), cyan: wrap(36, 39) }
}

export function oneLine(value: unknown, max = 100): string {
  const s = typeof value === 'string' ? value : JSON.stringify(value)
  const flat = (s ?? '').replace(/\s+/g, ' ')
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** The text of a message's content: strings as they are, text blocks joined, other blocks named. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return oneLine(content)
  return content
    .map((block) => {
      const b = asObject(block)
      if (!b) return oneLine(block)
      if (b.type === 'text' && typeof b.text === 'string') return b.text
      if (b.type === 'reasoning') return ''
      if (b.type === 'tool-call') return ''
      return `[${String(b.type)}]`
    })
    .filter(Boolean)
    .join('\n')
}

function toolCalls(content: unknown): { callId: string; name: string; arguments: JsonValue }[] {
  if (!Array.isArray(content)) return []
  return content
    .map(asObject)
    .filter((b): b is JsonObject => b?.type === 'tool-call')
    .map((b) => ({ callId: String(b.callId), name: String(b.name), arguments: (b.arguments ?? null) as JsonValue }))
}

/** An event of a framework adapter (LangGraph, Claude Agent SDK) that its own renderer knows. */
function frameworkEvent(e: SessionEvent): { text: string; markdown: string } | undefined {
  return renderLangGraphEvent(e) ?? renderClaudeAgentSdkEvent(e)
}

const MESSAGE_TYPES = new Set(['system/message', 'user/message', 'assistant/message', 'tool/result'])

/**
 * How a view shows `history/rewind`: which events' messages are out of the model's history,
 * and one line for each rewind event (how many messages it took out, or why it is ignored).
 */
function rewindView(events: readonly SessionEvent[]): { rewound: (seq: number) => boolean; describe: (e: SessionEvent) => string } {
  const rewound = isRewoundBy(rewoundRanges(events))
  // Messages before each index; a loaded log has events[i].seq === i.
  const before = [0]
  for (const e of events) before.push(before.at(-1)! + (MESSAGE_TYPES.has(e.type) ? 1 : 0))
  return {
    rewound,
    describe: (e) => {
      const to = asObject(e.data)?.to
      if (typeof to !== 'number' || !Number.isSafeInteger(to) || to < 0) return `history rewind with an invalid 'to' (${oneLine(JSON.stringify(to ?? null), 40)}): ignored`
      if (to >= e.seq) return `history rewind to seq ${to}: nothing before it to drop`
      const dropped = before[Math.min(e.seq, events.length)]! - before[Math.min(to, events.length)]!
      return `history rewound to seq ${to}: ${dropped} message(s) from seq ${to} to ${e.seq - 1} are out of the model's history`
    },
  }
}

/** A UTC time to the second, as tables and reports show it: `2026-11-30 09:00:00`. */
export function formatTime(ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19)
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`
  return `${(n / 1024 ** 3).toFixed(2)} GiB`
}

/**
 * A session as a readable transcript: turns, steps, messages, tool calls with their results,
 * chunks folded into their message, the request header summarized; interrupted calls and the
 * closers a repair would write are marked.
 */
export function renderTranscript(session: LoadedSession, style: Style): string {
  const out: string[] = []
  const m = session.meta
  out.push(style.bold(`session ${m.id}`))
  out.push(style.dim(`created ${new Date(m.createdAt).toISOString()}${m.cwd ? `  cwd ${m.cwd}` : ''}${m.parentSession ? `  ${m.seedLength !== undefined ? `fork of ${m.parentSession} at ${m.seedLength}` : `delegated from ${m.parentSession}`}` : ''}  depth ${m.delegationDepth}`))
  const closerSeqs = new Set((session.repair?.closers ?? []).map((c) => c.seq))
  if (session.repair) {
    const r = session.repair
    const cut = r.truncatedAtByte !== undefined ? `${r.droppedBytes} bytes in ${r.droppedLines} line(s) from byte ${r.truncatedAtByte} (${r.reason})` : 'nothing'
    out.push(style.yellow(`${r.persisted ? 'repaired' : 'needs repair'}: cut ${cut}; ${r.closers.length} closing event(s)${r.persisted ? ' written' : ' would be written'}${r.droppedTurnEnds ? `; ${r.droppedTurnEnds} committed turn end(s) cut after zeroed blocks` : ''}`))
  }
  const chunks = new Map<string, number>()
  const results = new Map<string, SessionEvent>()
  for (const e of session.events) {
    const d = asObject(e.data)
    if (e.type === 'assistant/chunk') chunks.set(`${String(d?.turn)}/${String(d?.step)}`, (chunks.get(`${String(d?.turn)}/${String(d?.step)}`) ?? 0) + 1)
    if (e.type === 'tool/result' && typeof d?.callId === 'string') results.set(d.callId, e)
  }
  const rewinds = rewindView(session.events)
  const mark = (e: SessionEvent) =>
    (closerSeqs.has(e.seq) ? style.yellow(session.repair?.persisted ? ' [written by repair]' : ' [a repair would write this]') : '') +
    (MESSAGE_TYPES.has(e.type) && rewinds.rewound(e.seq) ? style.dim(' [rewound]') : '')
  // A run of events of one type this view does not know (streamed tool output, say) with
  // nothing printed in between is one line: its type, how many, and the first one's data.
  let run: { type: string; ignorable: boolean; count: number; first: SessionEvent; line: number } | undefined
  const unknownLine = (r: NonNullable<typeof run>) =>
    style.dim(`(${r.type}${r.count > 1 ? ` ×${r.count}` : ''}${r.ignorable ? ', ignorable' : ''}) ${oneLine(r.first.data ?? null, 80)}`)
  for (const e of session.events) {
    const d = asObject(e.data)
    switch (e.type) {
      case 'turn/start':
        out.push('', style.bold(`── turn ${String(d?.turn)} ──`))
        break
      case 'turn/end': {
        const kind = String(asObject(d?.reason)?.kind ?? '?')
        const text = `── end of turn ${String(d?.turn)} (${kind})`
        out.push((kind === 'interrupted' ? style.yellow(text) : style.dim(text)) + mark(e))
        break
      }
      case 'request/header': {
        const h = asObject(d?.header)
        const tools = Array.isArray(h?.tools) ? `${h.tools.length} tools` : ''
        out.push(style.dim(`request header (${String(d?.reason)}): ${[h?.model ? `model ${String(h.model)}` : '', tools].filter(Boolean).join(', ') || oneLine(d?.header, 80)}`))
        break
      }
      case 'system/message':
        out.push(`${style.cyan('system')}: ${contentText(d?.content)}${mark(e)}`)
        break
      case 'user/message':
        out.push(`${style.cyan('user')}: ${contentText(d?.content)}${mark(e)}`)
        break
      case 'history/rewind':
        out.push(style.yellow(`↶ ${rewinds.describe(e)}`))
        break
      case 'assistant/message': {
        const n = chunks.get(`${String(d?.turn)}/${String(d?.step)}`)
        const text = contentText(d?.content)
        out.push(`${style.cyan('assistant')}${n ? style.dim(` (streamed in ${n} chunks)`) : ''}${text ? `: ${text}` : ''}${mark(e)}`)
        for (const call of toolCalls(d?.content)) {
          const result = results.get(call.callId)
          out.push(`  → ${style.bold(call.name)} ${oneLine(call.arguments, 80)} ${style.dim(`[${call.callId}]`)}`)
          if (!result) out.push(style.yellow('    ⚠ no result recorded'))
        }
        break
      }
      case 'tool/result': {
        const interrupted = contentText(d?.content) === INTERRUPTED_TOOL_TEXT
        const text = `  ← ${style.dim(`[${String(d?.callId)}]`)} ${d?.isError ? style.red('error: ') : ''}${oneLine(contentText(d?.content), 100)}`
        out.push((interrupted ? style.yellow(`${text} ⚠ interrupted`) : text) + mark(e))
        break
      }
      case 'step/end':
        if (closerSeqs.has(e.seq)) out.push(style.dim(`  step ${String(d?.step)} ends`) + mark(e))
        break
      case 'step/start':
      case 'assistant/chunk':
      case 'tool/call':
        break
      default: {
        const framework = frameworkEvent(e)
        if (framework) {
          out.push(framework.text)
          break
        }
        if (run && run.type === e.type && out.length === run.line + 1) {
          run.count++
          run.ignorable &&= e.ignorable === true
          out[run.line] = unknownLine(run)
        } else {
          run = { type: e.type, ignorable: e.ignorable === true, count: 1, first: e, line: out.length }
          out.push(unknownLine(run))
        }
      }
    }
  }
  return `${out.join('\n')}\n`
}

/** The session as a Markdown document (for `export --format md`). */
export function renderMarkdown(session: LoadedSession): string {
  const m = session.meta
  const out: string[] = [`# Session ${m.id}`, '', `- created: ${new Date(m.createdAt).toISOString()}`]
  if (m.cwd) out.push(`- cwd: \`${m.cwd}\``)
  if (m.parentSession) out.push(`- parent: ${m.parentSession}${m.seedLength !== undefined ? ` (fork at ${m.seedLength})` : ''}`)
  out.push(`- delegation depth: ${m.delegationDepth}`, `- events: ${session.events.length}`, '')
  const fence = (s: string) => ['```', s, '```'].join('\n')
  const rewinds = rewindView(session.events)
  for (const e of session.events) {
    const d = asObject(e.data)
    if (MESSAGE_TYPES.has(e.type) && rewinds.rewound(e.seq)) out.push(`*(rewound: seq ${e.seq} is out of the model's history)*`, '')
    switch (e.type) {
      case 'history/rewind':
        out.push(`*↶ ${rewinds.describe(e)}.*`, '')
        break
      case 'turn/start':
        out.push(`## Turn ${String(d?.turn)}`, '')
        break
      case 'system/message':
        out.push(`**System:** ${contentText(d?.content)}`, '')
        break
      case 'user/message':
        out.push(`**User:** ${contentText(d?.content)}`, '')
        break
      case 'assistant/message': {
        const text = contentText(d?.content)
        if (text) out.push(`**Assistant:** ${text}`, '')
        for (const call of toolCalls(d?.content)) out.push(`Tool call \`${call.name}\` (${call.callId}):`, '', fence(JSON.stringify(call.arguments, null, 2)), '')
        break
      }
      case 'tool/result':
        out.push(`Result of ${String(d?.callId)}${d?.isError ? ' (error)' : ''}:`, '', fence(contentText(d?.content)), '')
        break
      case 'turn/end':
        out.push(`*Turn ended: ${String(asObject(d?.reason)?.kind ?? '?')}*`, '')
        break
      default: {
        const framework = frameworkEvent(e)
        if (framework) out.push(framework.markdown, '')
      }
    }
  }
  return `${out.join('\n').trimEnd()}\n`
}
