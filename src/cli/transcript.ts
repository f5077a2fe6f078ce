import type { LoadedSession } from '../persistence.js'
import { asObject } from '../session/as-object.js'
import { INTERRUPTED_TOOL_TEXT } from '../session/closers.js'
import type { JsonValue, SessionEvent, SessionMeta } from '../session/schema.js'
import { HistoryCounter, type HistoryMarks, marksOf } from './history-marks.js'
import {
  callText,
  contentIs,
  contentText,
  frameworkEvent,
  oneLine,
  requestHeaderText,
  resultText,
  shown,
  type Style,
  summaryText,
  toolCalls,
} from './render.js'

/** The closing events a view shows after the stored ones: those of a repair, done or to be done. */
export interface CloserMarks {
  seqs: ReadonlySet<number>
  persisted: boolean
}

/** A run of events of one type this view does not know, with nothing printed in between. */
interface UnknownRun {
  type: string
  ignorable: boolean
  count: number
  first: SessionEvent
}

/** The lines above a transcript: the session, when and where it was made, and what a repair would do. */
export function transcriptHeader(meta: SessionMeta, style: Style, notes: readonly string[]): string[] {
  const m = meta
  const parent = shown(m.parentSession, true)
  const lineage = m.parentSession ? `  ${m.seedLength !== undefined ? `fork of ${parent} at ${m.seedLength}` : `delegated from ${parent}`}` : ''
  return [
    style.bold(`session ${shown(m.id, true)}`),
    style.dim(`created ${new Date(m.createdAt).toISOString()}${m.cwd ? `  cwd ${shown(m.cwd, true)}` : ''}${lineage}  depth ${m.delegationDepth}`),
    ...notes,
  ]
}

/** What `inspect`'s repair report says, as the header line of a transcript. */
export function repairNote(r: NonNullable<LoadedSession['repair']>, style: Style): string {
  const cut = r.truncatedAtByte !== undefined ? `${r.droppedBytes} bytes in ${r.droppedLines} line(s) from byte ${r.truncatedAtByte} (${shown(r.reason, true)})` : 'nothing'
  return style.yellow(
    `${r.persisted ? 'repaired' : 'needs repair'}: cut ${cut}; ${r.closers.length} closing event(s)${r.persisted ? ' written' : ' would be written'}${r.droppedTurnEnds ? `; ${r.droppedTurnEnds} committed turn end(s) cut after zeroed blocks` : ''}`,
  )
}

/**
 * A transcript printed event by event (docs/cli.md, show): turns, steps, messages, tool calls
 * with their results, chunks folded into their message, rewinds and compactions with the
 * messages they take out marked, and the closers of a repair marked. What it needs from later
 * events comes from `marks` (a first pass); what it keeps itself is bounded: the chunk counts
 * of the open turn, one pending line of unknown events, and a count per seq `marks` asks for.
 */
export class TranscriptWriter {
  readonly #style: Style
  readonly #marks: HistoryMarks
  readonly #closers: CloserMarks | undefined
  readonly #emit: (line: string) => void
  readonly #chunks = new Map<string, number>()
  readonly #counter: HistoryCounter
  #run: UnknownRun | undefined

  constructor(options: { style: Style; marks: HistoryMarks; closers?: CloserMarks | undefined; emit: (line: string) => void }) {
    this.#style = options.style
    this.#marks = options.marks
    this.#counter = new HistoryCounter(options.marks)
    this.#closers = options.closers
    this.#emit = options.emit
  }

  event(e: SessionEvent): void {
    const style = this.#style
    const d = asObject(e.data)
    const { rewound, compacted } = this.#counter.see(e)
    const mark =
      (this.#closers?.seqs.has(e.seq) ? style.yellow(this.#closers.persisted ? ' [written by repair]' : ' [a repair would write this]') : '') +
      (rewound ? style.dim(' [rewound]') : '') +
      (compacted ? style.dim(' [compacted]') : '')
    const key = `${String(d?.turn)}/${String(d?.step)}`
    switch (e.type) {
      case 'turn/start':
        this.#chunks.clear() // chunks of a turn that ended without its message
        this.#push('', style.bold(`── turn ${shown(d?.turn, true)} ──`))
        break
      case 'turn/end': {
        const kind = shown(asObject(d?.reason)?.kind ?? '?', true)
        const text = `── end of turn ${shown(d?.turn, true)} (${kind})`
        this.#push((kind === 'interrupted' ? style.yellow(text) : style.dim(text)) + mark)
        break
      }
      case 'request/header':
        this.#push(style.dim(requestHeaderText(d)))
        break
      case 'system/message':
        this.#push(`${style.cyan('system')}: ${contentText(d?.content)}${mark}`)
        break
      case 'user/message':
        this.#push(`${style.cyan('user')}: ${contentText(d?.content)}${mark}`)
        break
      case 'history/rewind':
        this.#push(style.yellow(`↶ ${this.#counter.rewindText(e)}`))
        break
      case 'history/compact': {
        const text = this.#counter.compactionText(e)
        this.#push(style.yellow(`⇤ ${text}`))
        if (!text.endsWith(': ignored')) this.#push(`  ${style.cyan('summary')}: ${summaryText(e)}`)
        break
      }
      case 'assistant/chunk':
        this.#chunks.set(key, (this.#chunks.get(key) ?? 0) + 1)
        break
      case 'assistant/message': {
        const n = this.#chunks.get(key)
        this.#chunks.delete(key)
        const text = contentText(d?.content)
        this.#push(`${style.cyan('assistant')}${n ? style.dim(` (streamed in ${n} chunks)`) : ''}${text ? `: ${text}` : ''}${mark}`)
        for (const call of toolCalls(d?.content)) {
          this.#push(`  ${callText(call, style)}`)
          if (this.#marks.unanswered(e.seq, call.callId)) this.#push(style.yellow('    ⚠ no result recorded'))
        }
        break
      }
      case 'tool/result': {
        const text = `  ${resultText(d, style)}`
        this.#push((contentIs(d?.content, INTERRUPTED_TOOL_TEXT) ? style.yellow(`${text} ⚠ interrupted`) : text) + mark)
        break
      }
      case 'step/end':
        if (this.#closers?.seqs.has(e.seq)) this.#push(style.dim(`  step ${shown(d?.step, true)} ends`) + mark)
        break
      case 'tool/call': {
        // A call no assistant message holds (§7): its call line, as a message's call would have.
        if (!this.#marks.lone(e.seq)) break
        const call = { callId: String(d?.callId), name: String(d?.name), arguments: (d?.arguments ?? null) as JsonValue }
        const compaction = this.#marks.inForce
        const standing = this.#marks.rewound(e.seq) ? style.dim(' [rewound]') : compaction !== undefined && e.seq < compaction.keep ? style.dim(' [compacted]') : ''
        this.#push(`  ${callText(call, style)}${standing}`)
        if (this.#marks.unanswered(e.seq, call.callId)) this.#push(style.yellow('    ⚠ no result recorded'))
        break
      }
      case 'step/start':
        break
      default: {
        const framework = frameworkEvent(e)
        if (framework) this.#push(framework.text)
        else if (this.#run?.type === e.type) {
          this.#run.count++
          this.#run.ignorable &&= e.ignorable === true
        } else {
          this.#flushRun()
          this.#run = { type: e.type, ignorable: e.ignorable === true, count: 1, first: e }
        }
      }
    }
  }

  /** Prints what is still held (a run of unknown events). */
  end(): void {
    this.#flushRun()
  }

  #push(...lines: string[]): void {
    this.#flushRun()
    for (const line of lines) this.#emit(line)
  }

  #flushRun(): void {
    const r = this.#run
    if (!r) return
    this.#run = undefined
    this.#emit(this.#style.dim(`(${shown(r.type, true)}${r.count > 1 ? ` ×${r.count}` : ''}${r.ignorable ? ', ignorable' : ''}) ${oneLine(r.first.data ?? null, 80)}`))
  }
}

/**
 * A session held in memory as a readable transcript (`show` of a log small enough to inspect):
 * the same writer, fed every event at once.
 */
export function renderTranscript(session: LoadedSession, style: Style): string {
  const lines = transcriptHeader(session.meta, style, session.repair ? [repairNote(session.repair, style)] : [])
  const closers = session.repair ? { seqs: new Set(session.repair.closers.map((c) => c.seq)), persisted: session.repair.persisted } : undefined
  const writer = new TranscriptWriter({ style, marks: marksOf(session.events, true), closers, emit: (l) => lines.push(l) })
  for (const e of session.events) writer.event(e)
  writer.end()
  return `${lines.join('\n')}\n`
}
