import { ioError } from '../errors.js'
import { asObject } from '../session/as-object.js'
import { encodeSessionId } from '../session/id-encoding.js'
import type { JsonValue, SessionEvent, SessionHeader } from '../session/schema.js'
import { findOneLog } from './find-logs.js'
import type { FileSystem } from './fs/file-system.js'
import { planRepair, type RepairReport } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import { createStoreContext } from './store-context.js'

/** What `inspect` of a log would say of it, without its events (`verify`, §15.5). */
export interface LogCheck {
  header: SessionHeader
  /** Valid events in the log (closers not counted): `inspect`'s events less its closers. */
  events: number
  /** The repair a load would make (`inspect`'s `repair`), undefined when there is none. */
  repair: Omit<RepairReport, 'persisted'> | undefined
}

/**
 * Checks the log of `id` under the JSONL root `root` as `inspect` reads it (the same lookup, the
 * same scan, the same repair plan and the same errors: `E_CORRUPT`, `E_FORMAT_UNSUPPORTED`,
 * `E_NOT_FOUND`, `E_AMBIGUOUS`, `E_IO`), in one pass that keeps no event: memory does not grow
 * with the log's size. Read-only, no lock taken.
 */
export async function checkLog(root: string, id: string, options: { fs?: FileSystem } = {}): Promise<LogCheck> {
  const { ctx } = createStoreContext({ root, ...(options.fs ? { fs: options.fs } : {}) })
  encodeSessionId(id)
  try {
    const path = await findOneLog(ctx, id)
    const handle = await ctx.fs.open(path, 'r')
    try {
      const openTurn = new OpenTurnTracker()
      const scan = await scanLog(handle, { path, sessionId: id, keepEvents: false, onEventLine: (_buf, _start, _end, event) => openTurn.add(event) })
      const plan = planRepair({ ...scan, events: openTurn.events() }, { path, sessionId: id, closeOpenTurn: true })
      return { header: scan.header, events: scan.eventCount, repair: plan.report }
    } finally {
      await handle.close()
    }
  } catch (err) {
    throw ioError(err, `inspect session '${id}'`) // as inspect words it
  }
}

const jsonOr = (v: unknown, fallback: JsonValue): JsonValue => (v === undefined ? fallback : (v as JsonValue))

/**
 * The turn still open at the end of a log, followed event by event as `findOpenTurn`
 * (src/session/closers.ts) follows it over a whole log: its number, its open step, its unanswered
 * calls and the call ids it has seen. `events()` gives the few events from which
 * `computeClosers` computes the closers it would compute from the whole log. What it holds grows
 * with the open turn's tool calls (their ids), not with the log's bytes.
 */
class OpenTurnTracker {
  #open: { turn: JsonValue; step: { turn: JsonValue; step: JsonValue } | undefined; pending: Map<string, { turn: JsonValue; step: JsonValue }> } | undefined
  #seen = new Set<string>()
  #lastSeq = 0
  #lastTime = 0

  add(event: SessionEvent): void {
    this.#lastSeq = event.seq
    this.#lastTime = event.time
    const data = asObject(event.data)
    const open = this.#open
    switch (event.type) {
      case 'turn/start':
        this.#open = { turn: jsonOr(data?.turn, null), step: undefined, pending: new Map() }
        this.#seen = new Set()
        break
      case 'turn/end':
        this.#open = undefined
        this.#seen = new Set() // no call counts until the next turn/start, which forgets them anyway
        break
      case 'step/start':
        if (open) open.step = { turn: jsonOr(data?.turn, open.turn), step: jsonOr(data?.step, null) }
        break
      case 'step/end':
        if (open) open.step = undefined
        break
      case 'assistant/message': {
        const content = data?.content
        if (!Array.isArray(content)) break
        for (const block of content) {
          const b = asObject(block)
          if (b?.type === 'tool-call') this.#call(b.callId, data?.turn, data?.step)
        }
        break
      }
      case 'tool/call':
        this.#call(data?.callId, data?.turn, data?.step)
        break
      case 'tool/result':
        if (open && typeof data?.callId === 'string') open.pending.delete(data.callId) // ids are unique: seen once
        break
    }
  }

  #call(callId: unknown, turn: unknown, step: unknown): void {
    const open = this.#open
    if (!open || typeof callId !== 'string' || this.#seen.has(callId)) return
    this.#seen.add(callId)
    open.pending.set(callId, { turn: jsonOr(turn, open.turn), step: jsonOr(step, open.step?.step ?? null) })
  }

  /**
   * The open turn as events that `findOpenTurn` reads back into the same turn, step and pending
   * calls (every value given, none left to a fallback), then an event of no type it looks at
   * with the last event's seq and time; none when no turn is open.
   */
  events(): SessionEvent[] {
    const open = this.#open
    if (!open) return []
    const at = { seq: this.#lastSeq, time: this.#lastTime }
    const events: SessionEvent[] = [{ ...at, type: 'turn/start', data: { turn: open.turn } }]
    if (open.step) events.push({ ...at, type: 'step/start', data: { turn: open.step.turn, step: open.step.step } })
    for (const [callId, p] of open.pending) events.push({ ...at, type: 'tool/call', data: { callId, turn: p.turn, step: p.step } })
    events.push({ ...at, type: 'log/check-last' })
    return events
  }
}
