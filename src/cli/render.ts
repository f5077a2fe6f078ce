import type { JsonValue, SessionEvent } from '../session/schema.js'
import { INTERRUPTED_TOOL_TEXT } from '../session/closers.js'
import { asObject, type JsonObject } from '../session/as-object.js'
import { compactionKeep } from '../session/tail-start.js'
import { renderClaudeAgentSdkEvent } from './render-claude-agent-sdk.js'
import { renderLangGraphEvent } from './render-langgraph.js'
import { ellipsis, feedJson, feedString, FoldedLine, type Sink } from './bounded-text.js'

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

// What a terminal would act on rather than show: C0 controls but \n and \t, DEL, C1, and the
// bidirectional overrides and isolates (text shown in another order than it is stored).
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g
const UNPRINTABLE_OR_BREAK = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g
const ESCAPES: Record<string, string> = { '\n': '\\n', '\t': '\\t', '\r': '\\r' }

/**
 * Stored text as the human views print it (never --json, never raw output): every character a
 * terminal would act on instead of showing (an escape sequence setting the title, clearing the
 * screen, writing the clipboard or hiding text; a carriage return or backspace overwriting what
 * was printed; a bidi override reordering it) becomes a visible escape, `\x1b` or `\u202e`.
 * Applied to the data before the CLI's own styling, so its colours still work. `\n` and `\t`
 * are kept, unless `singleLine` is set (ids, paths, table cells: they are escaped too).
 */
export function printable(s: string, singleLine = false): string {
  return s.replace(singleLine ? UNPRINTABLE_OR_BREAK : UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0)
    return ESCAPES[c] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`)
  })
}

/** Any stored value as printable text (`printable(String(value))`). */
export const shown = (value: unknown, singleLine = false): string => printable(String(value), singleLine)

/**
 * A value on one line, whitespace runs folded, printable, at most `max` characters: a string as
 * it is, anything else as its JSON. Only the start of a long value is read (bounded-text.ts).
 */
export function oneLine(value: unknown, max = 100): string {
  return typeof value === 'string' ? foldedLine(max, (sink) => feedString(value, sink)) : jsonLine(value, max)
}

/** `oneLine(JSON.stringify(value), max)`, without the whole JSON text. */
export function jsonLine(value: unknown, max = 100): string {
  return foldedLine(max, (sink) => feedJson(value, sink))
}

function foldedLine(max: number, feed: (sink: Sink) => unknown): string {
  const line = new FoldedLine(max, printable)
  feed(line.add)
  return ellipsis(line.text, max)
}

/** `oneLine(contentText(content), max)`, without the whole text. */
export function contentLine(content: unknown, max: number): string {
  return foldedLine(max, (sink) => feedContent(content, sink))
}

/** Whether `contentText(content)` is `text`, reading no more of it than that. */
export function contentIs(content: unknown, text: string): boolean {
  let start = ''
  feedContent(content, (piece) => (start += piece).length > text.length)
  return start === text
}

/** Feeds `sink` what `contentText(content)` is, piece by piece, until it is full. */
function feedContent(content: unknown, sink: Sink): void {
  const text = (s: string) => feedString(s, sink, printable)
  if (typeof content === 'string') return void text(content)
  if (!Array.isArray(content)) return void sink(oneLine(content))
  let any = false
  for (const block of content) {
    const b = asObject(block)
    let piece: string | undefined
    if (!b) piece = oneLine(block)
    else if (b.type === 'text' && typeof b.text === 'string') {
      if (b.text === '') continue
      if ((any && sink('\n')) || text(b.text)) return
      any = true
      continue
    } else if (b.type === 'reasoning' || b.type === 'tool-call') continue
    else piece = `[${shown(b.type, true)}]`
    if (piece === '') continue
    if ((any && sink('\n')) || sink(piece)) return
    any = true
  }
}

/** The text of a message's content, printable: strings as they are, text blocks joined, other blocks named. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return printable(content)
  if (!Array.isArray(content)) return oneLine(content)
  return content
    .map((block) => {
      const b = asObject(block)
      if (!b) return oneLine(block)
      if (b.type === 'text' && typeof b.text === 'string') return printable(b.text)
      if (b.type === 'reasoning') return ''
      if (b.type === 'tool-call') return ''
      return `[${shown(b.type, true)}]`
    })
    .filter(Boolean)
    .join('\n')
}

/** The `tool-call` blocks of an assistant message's content. */
export function toolCalls(content: unknown): { callId: string; name: string; arguments: JsonValue }[] {
  if (!Array.isArray(content)) return []
  return content
    .map(asObject)
    .filter((b): b is JsonObject => b?.type === 'tool-call')
    .map((b) => ({ callId: String(b.callId), name: String(b.name), arguments: (b.arguments ?? null) as JsonValue }))
}

/** An event of a framework adapter (LangGraph, Claude Agent SDK) that its own renderer knows. */
export function frameworkEvent(e: SessionEvent): { readonly text: string; readonly markdown: string } | undefined {
  const r = renderLangGraphEvent(e) ?? renderClaudeAgentSdkEvent(e)
  // Each made when asked for: `show` wants the text, `export` the Markdown (either can be a whole message).
  return (
    r && {
      get text() {
        return printable(r.text)
      },
      get markdown() {
        return printable(r.markdown)
      },
    }
  )
}

export const MESSAGE_TYPES = new Set(['system/message', 'user/message', 'assistant/message', 'tool/result'])

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


/** How a request header reads: its model and tool count, or its JSON. */
export function requestHeaderText(data: JsonObject | undefined): string {
  const h = asObject(data?.header)
  const tools = Array.isArray(h?.tools) ? `${h.tools.length} tools` : ''
  return `request header (${shown(data?.reason, true)}): ${[h?.model ? `model ${shown(h.model, true)}` : '', tools].filter(Boolean).join(', ') || oneLine(data?.header, 80)}`
}

/** A tool call as the transcript and `tail` show it: `→ name args [callId]`. */
export function callText(call: { callId: string; name: string; arguments: JsonValue }, style: Style): string {
  return `→ ${style.bold(shown(call.name, true))} ${oneLine(call.arguments, 80)} ${style.dim(`[${shown(call.callId, true)}]`)}`
}

/** A tool result: `← [callId] text`, its error marked. */
export function resultText(data: JsonObject | undefined, style: Style): string {
  return `← ${style.dim(`[${shown(data?.callId, true)}]`)} ${data?.isError ? style.red('error: ') : ''}${contentLine(data?.content, 100)}`
}

/**
 * What a `history/rewind` did. `dropped` is the number of messages it took out, when known (a
 * page that starts after its `to` does not know it).
 */
export function describeRewind(e: SessionEvent, dropped: number | undefined): string {
  const to = asObject(e.data)?.to
  if (typeof to !== 'number' || !Number.isSafeInteger(to) || to < 0) return `history rewind with an invalid 'to' (${jsonLine(to ?? null, 40)}): ignored`
  if (to >= e.seq) return `history rewind to seq ${to}: nothing before it to drop`
  return `history rewound to seq ${to}: ${dropped === undefined ? 'the messages' : `${dropped} message(s)`} from seq ${to} to ${e.seq - 1} are out of the model's history`
}

/** Where a compaction stands, as the views say it (nothing when a page cannot know). */
export type CompactionState = { kind: 'in-force' } | { kind: 'superseded'; by: number } | { kind: 'rewound' } | { kind: 'unknown' }

/**
 * What a `history/compact` does (§7): its summary replaces the messages before its
 * `firstKeptSeq` in the model's history. `replaced` is how many, when known.
 */
export function describeCompaction(e: SessionEvent, replaced: number | undefined, state: CompactionState): string {
  const keep = compactionKeep(e)
  if (keep === undefined) return `history compaction with an invalid summary or firstKeptSeq (${jsonLine(asObject(e.data)?.firstKeptSeq ?? null, 40)}): ignored`
  const what = `history compacted: the summary replaces ${replaced === undefined ? 'the messages' : `${replaced} message(s)`} before seq ${keep} in the model's history`
  switch (state.kind) {
    case 'in-force':
      return `${what}; in force`
    case 'superseded':
      return `${what}; superseded by the compaction at seq ${state.by}`
    case 'rewound':
      return `${what}; undone by a later rewind`
    case 'unknown':
      return what
  }
}

/** A compaction's summary as text. */
export function summaryText(e: SessionEvent): string {
  return contentText(asObject(e.data)?.summary)
}

/**
 * One event on one line, as `tail` prints it: its seq, then what the transcript would show of
 * it (chunks and step boundaries too, since a live view wants to see them arrive).
 */
export function eventLine(e: SessionEvent, style: Style): string {
  return `${style.dim(`#${e.seq}`)} ${eventBody(e, style)}`
}

function eventBody(e: SessionEvent, style: Style): string {
  const d = asObject(e.data)
  switch (e.type) {
    case 'turn/start':
      return style.bold(`── turn ${shown(d?.turn, true)} ──`)
    case 'turn/end': {
      const kind = shown(asObject(d?.reason)?.kind ?? '?', true)
      const text = `── end of turn ${shown(d?.turn, true)} (${kind})`
      return kind === 'interrupted' ? style.yellow(text) : style.dim(text)
    }
    case 'step/start':
      return style.dim(`step ${shown(d?.step, true)} starts`)
    case 'step/end':
      return style.dim(`step ${shown(d?.step, true)} ends`)
    case 'request/header':
      return style.dim(requestHeaderText(d))
    case 'system/message':
    case 'user/message':
      return `${style.cyan(e.type === 'user/message' ? 'user' : 'system')}: ${contentLine(d?.content, 200)}`
    case 'assistant/message': {
      const text = contentLine(d?.content, 200)
      return [`${style.cyan('assistant')}${text ? `: ${text}` : ''}`, ...toolCalls(d?.content).map((c) => callText(c, style))].join('  ')
    }
    case 'assistant/chunk':
      return style.dim(`assistant (chunk) ${oneLine(d?.chunk ?? null, 100)}`)
    case 'tool/call':
      return callText({ callId: String(d?.callId), name: String(d?.name), arguments: (d?.arguments ?? null) as JsonValue }, style)
    case 'tool/result': {
      const text = resultText(d, style)
      return contentIs(d?.content, INTERRUPTED_TOOL_TEXT) ? style.yellow(`${text} ⚠ interrupted`) : text
    }
    case 'history/rewind':
      return style.yellow(`↶ ${describeRewind(e, undefined)}`)
    case 'history/compact':
      return style.yellow(`⇤ ${describeCompaction(e, undefined, { kind: 'unknown' })}: ${contentLine(asObject(e.data)?.summary, 120)}`)
    default: {
      const framework = frameworkEvent(e)
      if (framework) return oneLine(framework.text, 200)
      return style.dim(`(${shown(e.type, true)}${e.ignorable ? ', ignorable' : ''}) ${oneLine(e.data ?? null, 100)}`)
    }
  }
}
