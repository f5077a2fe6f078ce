import { asObject } from './as-object.js'
import type { JsonValue, SessionEvent } from './schema.js'

/** The exact text of a recorded interrupted call (docs/contract.md §6.1). */
export const INTERRUPTED_TOOL_TEXT = 'Tool call interrupted by a crash; no result was recorded.'

// The storage is vocabulary-agnostic: a malformed `data` must never crash repair, only be ignored.
const jsonOr = (v: unknown, fallback: JsonValue): JsonValue => (v === undefined ? fallback : (v as JsonValue))

interface PendingCall {
  callId: string
  turn: JsonValue
  step: JsonValue
}

/** The open turn at the end of `events`: its number, its open step and its unanswered calls. */
export interface OpenTurn {
  turn: JsonValue
  step: { turn: JsonValue; step: JsonValue } | undefined
  pending: PendingCall[]
}

/**
 * Follows turns, steps and tool calls through a log (docs/contract.md §6.1), one event at a time:
 * what it holds is the open turn (its number, open step and unanswered calls, by id) and the call
 * ids that turn has seen, never the events, so a pass over a log of any size can use it (§15.5).
 */
export class OpenTurnTracker {
  #open: { turn: JsonValue; step: OpenTurn['step']; pending: Map<string, { turn: JsonValue; step: JsonValue }> } | undefined
  #seen = new Set<string>()
  #events = 0
  #lastSeq = 0
  #lastTime = 0

  add(event: SessionEvent): void {
    this.#events++
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
        if (open && typeof data?.callId === 'string') open.pending.delete(data.callId) // a call id is pending once
        break
    }
  }

  #call(callId: unknown, turn: unknown, step: unknown): void {
    const open = this.#open
    if (!open || typeof callId !== 'string' || this.#seen.has(callId)) return
    this.#seen.add(callId)
    open.pending.set(callId, { turn: jsonOr(turn, open.turn), step: jsonOr(step, open.step?.step ?? null) })
  }

  /** The turn open after the events added so far; undefined when none is. */
  openTurn(): OpenTurn | undefined {
    const open = this.#open
    return open && { turn: open.turn, step: open.step, pending: [...open.pending].map(([callId, p]) => ({ callId, ...p })) }
  }

  /** The seq and time of the last event added; undefined before any. */
  last(): { seq: number; time: number } | undefined {
    return this.#events > 0 ? { seq: this.#lastSeq, time: this.#lastTime } : undefined
  }

  /** What `computeClosers` gives for the events added so far (`createdAt`: the session's, for a log with none). */
  closers(createdAt: number): SessionEvent[] {
    return closersOf(this.openTurn(), this.last(), createdAt)
  }
}

/** The open turn at the end of `events` (docs/contract.md §6.1); undefined when no turn is open. */
export function findOpenTurn(events: readonly SessionEvent[]): OpenTurn | undefined {
  const tracker = new OpenTurnTracker()
  for (const event of events) tracker.add(event)
  return tracker.openTurn()
}

/**
 * The events that close an open final turn (docs/contract.md §6.1): an interrupted `tool/result` per
 * pending call, `step/end` if a step is open, then `turn/end` with reason `interrupted`.
 * Seqs continue the log; `time` is the last event's (or `createdAt` for an empty log).
 */
export function computeClosers(events: readonly SessionEvent[], createdAt: number): SessionEvent[] {
  return closersOf(findOpenTurn(events), events[events.length - 1], createdAt)
}

function closersOf(open: OpenTurn | undefined, last: { seq: number; time: number } | undefined, createdAt: number): SessionEvent[] {
  if (!open) return []
  const time = last ? last.time : createdAt
  let seq = last ? last.seq + 1 : 0 // a tail (§15.1) starts past seq 0
  const closers: SessionEvent[] = []
  for (const call of open.pending) {
    closers.push({
      seq: seq++,
      type: 'tool/result',
      time,
      data: {
        turn: call.turn,
        step: call.step,
        callId: call.callId,
        content: [{ type: 'text', text: INTERRUPTED_TOOL_TEXT }],
        isError: true,
        error: { name: 'InterruptedError', code: 'interrupted' },
      },
    })
  }
  if (open.step) {
    closers.push({ seq: seq++, type: 'step/end', time, data: { turn: open.step.turn, step: open.step.step } })
  }
  closers.push({ seq: seq++, type: 'turn/end', time, data: { turn: open.turn, reason: { kind: 'interrupted' } } })
  return closers
}
