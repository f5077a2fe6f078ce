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

/** Follows turns, steps and tool calls through a log (docs/contract.md §6.1); undefined when no turn is open. */
export function findOpenTurn(events: readonly SessionEvent[]): OpenTurn | undefined {
  let open: OpenTurn | undefined
  let seen = new Set<string>()
  const openCall = (callId: unknown, turn: unknown, step: unknown) => {
    if (!open || typeof callId !== 'string' || seen.has(callId)) return
    seen.add(callId)
    open.pending.push({ callId, turn: jsonOr(turn, open.turn), step: jsonOr(step, open.step?.step ?? null) })
  }
  for (const event of events) {
    const data = asObject(event.data)
    switch (event.type) {
      case 'turn/start':
        open = { turn: jsonOr(data?.turn, null), step: undefined, pending: [] }
        seen = new Set()
        break
      case 'turn/end':
        open = undefined
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
          if (b?.type === 'tool-call') openCall(b.callId, data?.turn, data?.step)
        }
        break
      }
      case 'tool/call':
        openCall(data?.callId, data?.turn, data?.step)
        break
      case 'tool/result':
        if (open && typeof data?.callId === 'string') {
          const i = open.pending.findIndex((p) => p.callId === data.callId)
          if (i !== -1) open.pending.splice(i, 1)
        }
        break
    }
  }
  return open
}

/**
 * The events that close an open final turn (docs/contract.md §6.1): an interrupted `tool/result` per
 * pending call, `step/end` if a step is open, then `turn/end` with reason `interrupted`.
 * Seqs continue the log; `time` is the last event's (or `createdAt` for an empty log).
 */
export function computeClosers(events: readonly SessionEvent[], createdAt: number): SessionEvent[] {
  const open = findOpenTurn(events)
  if (!open) return []
  const last = events[events.length - 1]
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
