// The closers a repair must append, written from the contract's rule (docs/contract.md §6.1)
// and deliberately not from the package's own implementation: the proofs compare what the
// package writes with this, so a bug in the package cannot hide behind its own oracle.
import type { SessionEvent } from '../session/schema.js'

type Json = Exclude<SessionEvent['data'], undefined>
type Fields = Record<string, unknown>

const TEXT = 'Tool call interrupted by a crash; no result was recorded.'

function fieldsOf(value: unknown): Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Fields) : {}
}

/** A field as it was recorded, or the given fallback when the event does not carry it. */
function recorded(fields: Fields, key: string, fallback: Json): Json {
  return key in fields && fields[key] !== undefined ? (fields[key] as Json) : fallback
}

interface OpenCall {
  callId: string
  turn: Json
  step: Json
}

/**
 * The closers of `events` (the kept prefix of a log): for the open turn, if any, one
 * interrupted `tool/result` per call still pending (in the order the calls were opened, with the
 * turn and step they were opened in), a `step/end` when a step is open, then the `turn/end`
 * with reason `interrupted`. Seqs continue the log; `time` is the last kept event's, or
 * `createdAt` when nothing was kept.
 *
 * Where an event does not say which turn or step it belongs to, the enclosing turn's number and
 * step's number are used (null when there is none): the contract is silent, and this is the
 * reading "the turn and step it was opened in". A call needs a string `callId`; a callId opened
 * once in a turn is not opened again in that turn, even after its result.
 */
export function expectedClosers(events: readonly SessionEvent[], createdAt: number): SessionEvent[] {
  let inTurn = false
  let turn: Json = null
  let step: { turn: Json; step: Json } | undefined
  let pending: OpenCall[] = []
  let opened = new Set<string>()
  const open = (callId: unknown, fields: Fields) => {
    if (!inTurn || typeof callId !== 'string' || opened.has(callId)) return
    opened.add(callId)
    pending.push({ callId, turn: recorded(fields, 'turn', turn), step: recorded(fields, 'step', step ? step.step : null) })
  }
  for (const e of events) {
    const d = fieldsOf(e.data)
    if (e.type === 'turn/start') {
      inTurn = true
      turn = recorded(d, 'turn', null)
      step = undefined
      pending = []
      opened = new Set()
    } else if (e.type === 'turn/end') {
      inTurn = false
    } else if (!inTurn) {
      continue
    } else if (e.type === 'step/start') {
      step = { turn: recorded(d, 'turn', turn), step: recorded(d, 'step', null) }
    } else if (e.type === 'step/end') {
      step = undefined
    } else if (e.type === 'assistant/message' && Array.isArray(d.content)) {
      for (const block of d.content) {
        const b = fieldsOf(block)
        if (b.type === 'tool-call') open(b.callId, d)
      }
    } else if (e.type === 'tool/call') {
      open(d.callId, d)
    } else if (e.type === 'tool/result' && typeof d.callId === 'string') {
      pending = pending.filter((c) => c.callId !== d.callId)
    }
  }
  if (!inTurn) return []
  const time = events.length > 0 ? events[events.length - 1]!.time : createdAt
  let seq = events.length
  const out: SessionEvent[] = pending.map((c) => ({
    seq: seq++,
    type: 'tool/result',
    time,
    data: {
      turn: c.turn,
      step: c.step,
      callId: c.callId,
      content: [{ type: 'text', text: TEXT }],
      isError: true,
      error: { name: 'InterruptedError', code: 'interrupted' },
    },
  }))
  if (step) out.push({ seq: seq++, type: 'step/end', time, data: { turn: step.turn, step: step.step } })
  out.push({ seq: seq++, type: 'turn/end', time, data: { turn, reason: { kind: 'interrupted' } } })
  return out
}
