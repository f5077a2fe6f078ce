import type { SessionEvent, SessionMeta } from '../../src/index.js'

export const meta = (id: string, extra: Partial<SessionMeta> = {}): SessionMeta => ({
  id,
  createdAt: 1_700_000_000_000,
  delegationDepth: 0,
  ...extra,
})

let clock = 1_700_000_000_000
export const ev = (seq: number, type: string, data?: SessionEvent['data']): SessionEvent =>
  data === undefined ? { seq, type, time: ++clock } : { seq, type, time: ++clock, data }

/** A complete turn of `n` events starting at `seq` (turn/start … turn/end). */
export function turn(seq: number, turnNo: number): SessionEvent[] {
  return [
    ev(seq, 'turn/start', { turn: turnNo }),
    ev(seq + 1, 'user/message', { content: `question ${turnNo}` }),
    ev(seq + 2, 'assistant/message', { turn: turnNo, step: 0, content: [{ type: 'text', text: `answer ${turnNo}` }] }),
    ev(seq + 3, 'turn/end', { turn: turnNo, reason: { kind: 'completed' } }),
  ]
}
