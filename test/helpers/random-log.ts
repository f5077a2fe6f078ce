import fc from 'fast-check'
import type { SessionEvent } from '../../src/index.js'

/** One step of a random session (what a host may record). */
export type LogStep =
  | { kind: 'turn'; calls: number; answered: boolean[] }
  | { kind: 'header' }
  | { kind: 'compact'; keepBack: number; insideTurn: boolean }
  | { kind: 'rewind'; back: number }

export const logStepArb: fc.Arbitrary<LogStep> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('turn' as const), calls: fc.nat(2), answered: fc.array(fc.boolean(), { minLength: 2, maxLength: 2 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('header' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compact' as const), keepBack: fc.nat(12), insideTurn: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rewind' as const), back: fc.integer({ min: 1, max: 10 }) }) },
)

/** How a random log ends: balanced, inside an open turn (a call dispatched), and/or with a torn tail. */
export interface LogEnd {
  openTurn: boolean
  torn: 'none' | 'partial-line' | 'nul-block'
}

export const logEndArb: fc.Arbitrary<LogEnd> = fc.record({
  openTurn: fc.boolean(),
  torn: fc.constantFrom('none' as const, 'partial-line' as const, 'nul-block' as const),
})

/**
 * The events of a random session: turns with tool calls (some unanswered, as an aborted turn
 * leaves them), request headers, compactions (some recorded inside a turn, their firstKeptSeq
 * anywhere before them), rewinds (which may undo a compaction), and an optional open final turn.
 */
export function buildLog(steps: readonly LogStep[], end: LogEnd): SessionEvent[] {
  const events: SessionEvent[] = []
  const push = (type: string, data?: SessionEvent['data']) => {
    const e: SessionEvent = data === undefined ? { seq: events.length, type, time: 1000 + events.length } : { seq: events.length, type, time: 1000 + events.length, data }
    events.push(e)
  }
  let turnNo = 0
  push('request/header', { header: { model: 'm', n: 0 }, reason: 'initial' })
  for (const step of steps) {
    switch (step.kind) {
      case 'header':
        push('request/header', { header: { model: 'm', n: events.length }, reason: 'change' })
        break
      case 'rewind':
        push('history/rewind', { to: Math.max(0, events.length - step.back) })
        break
      case 'compact':
        if (step.insideTurn) {
          turnNo++
          push('turn/start', { turn: turnNo })
          push('history/compact', { summary: `summary at ${events.length}`, firstKeptSeq: Math.max(0, events.length - step.keepBack) })
          push('user/message', { content: `q${turnNo}` })
          push('turn/end', { turn: turnNo, reason: { kind: 'completed' } })
        } else {
          push('history/compact', { summary: [{ type: 'text', text: `summary at ${events.length}` }], firstKeptSeq: Math.max(0, events.length - step.keepBack) })
        }
        break
      case 'turn': {
        turnNo++
        push('turn/start', { turn: turnNo })
        push('user/message', { content: `question ${turnNo}` })
        push('step/start', { turn: turnNo, step: 0 })
        const ids = Array.from({ length: step.calls }, (_, i) => `t${turnNo}c${i}`)
        push('assistant/message', { turn: turnNo, step: 0, content: [{ type: 'text', text: `a${turnNo}` }, ...ids.map((callId) => ({ type: 'tool-call', callId, name: 'sh', arguments: { n: turnNo } }))] })
        ids.forEach((callId, i) => {
          if (step.answered[i]) push('tool/result', { turn: turnNo, step: 0, callId, content: [{ type: 'text', text: `r${callId}` }] })
        })
        push('step/end', { turn: turnNo, step: 0 })
        push('turn/end', { turn: turnNo, reason: { kind: ids.every((_, i) => step.answered[i]) ? 'completed' : 'aborted' } })
        break
      }
    }
  }
  if (end.openTurn) {
    turnNo++
    push('turn/start', { turn: turnNo })
    push('user/message', { content: 'still running' })
    push('step/start', { turn: turnNo, step: 0 })
    push('assistant/message', { turn: turnNo, step: 0, content: [{ type: 'tool-call', callId: `open${turnNo}`, name: 'sh', arguments: {} }] })
  }
  return events
}

/** Bytes a crash may leave after the last acknowledged line. */
export function tornBytes(end: LogEnd, nextSeq: number): Buffer {
  if (end.torn === 'partial-line') return Buffer.from(`{"seq":${nextSeq},"type":"assistant/chunk","time":1,"data":{"chunk":"hal`)
  if (end.torn === 'nul-block') return Buffer.concat([Buffer.alloc(300), Buffer.from('\n')])
  return Buffer.alloc(0)
}
