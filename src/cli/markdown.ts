import { asObject } from '../session/as-object.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { HistoryCounter, type HistoryMarks } from './history-marks.js'
import { codeSpan, fence, messageBlock } from './markdown-blocks.js'
import { contentText, frameworkEvent, printable, shown, summaryText, toolCalls } from './render.js'


/** The lines above a Markdown export: the session's id, origin and size. */
export function markdownHeader(meta: SessionMeta, events: number): string[] {
  const m = meta
  const out: string[] = [`# Session ${shown(m.id, true)}`, '', `- created: ${new Date(m.createdAt).toISOString()}`]
  if (m.cwd) out.push(`- cwd: ${codeSpan(shown(m.cwd, true))}`)
  if (m.parentSession) out.push(`- parent: ${shown(m.parentSession, true)}${m.seedLength !== undefined ? ` (fork at ${m.seedLength})` : ''}`)
  out.push(`- delegation depth: ${m.delegationDepth}`, `- events: ${events}`, '')
  return out
}

/**
 * A session as a Markdown document, written event by event (`export --format md`). Like the
 * transcript, it learns what later events say from `marks` and keeps only bounded state; blank
 * lines are held back so that the document ends with exactly one newline.
 */
export class MarkdownWriter {
  readonly #marks: HistoryMarks
  readonly #emit: (text: string) => void
  readonly #counter: HistoryCounter
  #blank = 0
  #started = false

  constructor(options: { marks: HistoryMarks; emit: (text: string) => void }) {
    this.#marks = options.marks
    this.#counter = new HistoryCounter(options.marks)
    this.#emit = options.emit
  }

  /** Lines as they are, blank ones included (the header). */
  lines(lines: readonly string[]): void {
    for (const line of lines) this.#line(line)
  }

  event(e: SessionEvent): void {
    const d = asObject(e.data)
    const { rewound, compacted } = this.#counter.see(e)
    if (rewound) this.lines([`*(rewound: seq ${e.seq} is out of the model's history)*`, ''])
    else if (compacted) this.lines([`*(compacted: seq ${e.seq} is replaced in the model's history by the summary at seq ${this.#marks.inForce!.seq})*`, ''])
    switch (e.type) {
      case 'history/rewind':
        this.lines([`*↶ ${this.#counter.rewindText(e)}.*`, ''])
        break
      case 'history/compact': {
        const text = this.#counter.compactionText(e)
        this.lines([`*⇤ ${text}.*`, ''])
        if (!text.endsWith(': ignored')) this.message('Summary', summaryText(e))
        break
      }
      case 'turn/start':
        this.lines([`## Turn ${shown(d?.turn, true)}`, ''])
        break
      case 'system/message':
        this.message('System', contentText(d?.content))
        break
      case 'user/message':
        this.message('User', contentText(d?.content))
        break
      case 'assistant/message': {
        const text = contentText(d?.content)
        if (text) this.message('Assistant', text)
        for (const call of toolCalls(d?.content)) this.lines([`Tool call ${codeSpan(shown(call.name, true))} (${shown(call.callId, true)}):`, '', fence(printable(JSON.stringify(call.arguments, null, 2))), ''])
        break
      }
      case 'tool/call':
        // A call no assistant message holds (§7), as a message's call would be shown.
        if (this.#marks.lone(e.seq)) this.lines([`Tool call ${codeSpan(shown(d?.name, true))} (${shown(d?.callId, true)}):`, '', fence(printable(JSON.stringify(d?.arguments ?? null, null, 2))), ''])
        break
      case 'tool/result':
        this.lines([`Result of ${shown(d?.callId, true)}${d?.isError ? ' (error)' : ''}:`, '', fence(contentText(d?.content)), ''])
        break
      case 'turn/end':
        this.lines([`*Turn ended: ${shown(asObject(d?.reason)?.kind ?? '?', true)}*`, ''])
        break
      default: {
        const framework = frameworkEvent(e)
        if (framework) this.lines([framework.markdown, ''])
      }
    }
  }

  /** A message under its role (`messageBlock`): nothing in its text starts a block of the document. */
  message(role: string, text: string): void {
    this.lines([messageBlock(role, text), ''])
  }

  /** Ends the document with one newline. */
  end(): void {
    this.#emit('\n')
  }

  #line(line: string): void {
    if (line.trim() === '') {
      this.#blank++
      return
    }
    this.#emit(`${this.#started ? '\n'.repeat(this.#blank + 1) : ''}${line}`)
    this.#started = true
    this.#blank = 0
  }
}
