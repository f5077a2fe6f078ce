import { asObject } from '../session/as-object.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import type { HistoryMarks } from './history-marks.js'
import { contentText, describeCompaction, describeRewind, frameworkEvent, MESSAGE_TYPES, summaryText, toolCalls } from './render.js'

const fence = (s: string) => ['```', s, '```'].join('\n')

/** The lines above a Markdown export: the session's id, origin and size. */
export function markdownHeader(meta: SessionMeta, events: number): string[] {
  const m = meta
  const out: string[] = [`# Session ${m.id}`, '', `- created: ${new Date(m.createdAt).toISOString()}`]
  if (m.cwd) out.push(`- cwd: \`${m.cwd}\``)
  if (m.parentSession) out.push(`- parent: ${m.parentSession}${m.seedLength !== undefined ? ` (fork at ${m.seedLength})` : ''}`)
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
  readonly #counts = new Map<number, { all: number; shown: number }>()
  #messages = { all: 0, shown: 0 }
  #blank = 0
  #started = false

  constructor(options: { marks: HistoryMarks; emit: (text: string) => void }) {
    this.#marks = options.marks
    this.#emit = options.emit
  }

  /** Lines as they are, blank ones included (the header). */
  lines(lines: readonly string[]): void {
    for (const line of lines) this.#line(line)
  }

  event(e: SessionEvent): void {
    if (this.#marks.countsWanted.has(e.seq)) this.#counts.set(e.seq, { ...this.#messages })
    const d = asObject(e.data)
    const isMessage = MESSAGE_TYPES.has(e.type)
    const rewound = isMessage && this.#marks.rewound(e.seq)
    const compaction = this.#marks.inForce
    if (isMessage) this.#messages = { all: this.#messages.all + 1, shown: this.#messages.shown + (rewound ? 0 : 1) }
    if (rewound) this.lines([`*(rewound: seq ${e.seq} is out of the model's history)*`, ''])
    else if (isMessage && compaction !== undefined && e.seq < compaction.keep) {
      this.lines([`*(compacted: seq ${e.seq} is replaced in the model's history by the summary at seq ${compaction.seq})*`, ''])
    }
    switch (e.type) {
      case 'history/rewind': {
        const to = d?.to
        const before = typeof to === 'number' ? this.#counts.get(to) : undefined
        this.lines([`*↶ ${describeRewind(e, before === undefined ? undefined : this.#messages.all - before.all)}.*`, ''])
        break
      }
      case 'history/compact': {
        const keep = d?.firstKeptSeq
        const before = typeof keep === 'number' ? this.#counts.get(keep) : undefined
        const text = describeCompaction(e, before?.shown, this.#marks.status(e.seq))
        this.lines([`*⇤ ${text}.*`, ''])
        if (!text.endsWith(': ignored')) this.lines([`**Summary:** ${summaryText(e)}`, ''])
        break
      }
      case 'turn/start':
        this.lines([`## Turn ${String(d?.turn)}`, ''])
        break
      case 'system/message':
        this.lines([`**System:** ${contentText(d?.content)}`, ''])
        break
      case 'user/message':
        this.lines([`**User:** ${contentText(d?.content)}`, ''])
        break
      case 'assistant/message': {
        const text = contentText(d?.content)
        if (text) this.lines([`**Assistant:** ${text}`, ''])
        for (const call of toolCalls(d?.content)) this.lines([`Tool call \`${call.name}\` (${call.callId}):`, '', fence(JSON.stringify(call.arguments, null, 2)), ''])
        break
      }
      case 'tool/result':
        this.lines([`Result of ${String(d?.callId)}${d?.isError ? ' (error)' : ''}:`, '', fence(contentText(d?.content)), ''])
        break
      case 'turn/end':
        this.lines([`*Turn ended: ${String(asObject(d?.reason)?.kind ?? '?')}*`, ''])
        break
      default: {
        const framework = frameworkEvent(e)
        if (framework) this.lines([framework.markdown, ''])
      }
    }
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
