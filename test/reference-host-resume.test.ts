import { expect, test } from 'vitest'
import type { LoadedSession, SessionEvent } from '../src/index.js'
import { createReferenceHost } from '../src/testing/index.js'

// The reference host's resume(loaded) continues the stored session's numbers: a tail loaded from
// the last compaction may hold no turn/start (a compaction that kept nothing), and its turns
// started again at 1 (a hunt's find); its call ids started again at 1 on every resume.

const loadedFrom = (events: SessionEvent[], firstSeq: number): LoadedSession =>
  ({ meta: { id: 'session-1', createdAt: 1, delegationDepth: 0 }, events, firstSeq, length: firstSeq + events.length }) as unknown as LoadedSession

function sessionOfThreeTurns() {
  const host = createReferenceHost({ now: () => 1 })
  const s = host.startSession({ id: 'session-1' })
  for (let t = 0; t < 3; t++) {
    s.beginTurn(`question ${t}`)
    s.step({ text: 'calling', toolCalls: [{ name: 'add', arguments: { a: t } }] })
    for (const e of s.events.filter((e) => e.type === 'tool/call' && !s.events.some((r) => r.type === 'tool/result' && (r.data as { callId?: string }).callId === (e.data as { callId: string }).callId))) {
      s.toolResult((e.data as { callId: string }).callId, 'ok')
    }
    s.endTurn()
  }
  return { s, callIds: s.events.filter((e) => e.type === 'tool/call').map((e) => (e.data as { callId: string }).callId) }
}

test('a tail that holds only a compaction recording lastTurn: the next turn is 4, the next call id past the stored ones', () => {
  const { s, callIds } = sessionOfThreeTurns()
  expect(s.turn).toBe(3)
  const compaction: SessionEvent = { seq: s.events.length, type: 'history/compact', time: 1, data: { summary: 'all of it', firstKeptSeq: s.events.length }, lastTurn: 3 } as SessionEvent
  const resumed = createReferenceHost({ now: () => 1 }).resume(loadedFrom([compaction], s.events.length))
  expect(resumed.turn).toBe(3)
  resumed.beginTurn('next')
  expect(resumed.events.at(-2)).toMatchObject({ type: 'turn/start', data: { turn: 4 } })
  // A full resume: the turns and the call ids go on from the stored ones.
  const full = createReferenceHost({ now: () => 1 }).resume(loadedFrom(s.events.slice(), 0))
  full.beginTurn('again')
  full.step({ text: 'calling', toolCalls: [{ name: 'add', arguments: {} }] })
  const newId = (full.events.filter((e) => e.type === 'tool/call').at(-1)!.data as { callId: string }).callId
  expect([full.turn, callIds.includes(newId), callIds.length]).toEqual([4, false, 3])
})

test('a tail that records no turn and a compaction without lastTurn: the caller says where the numbers stand (lastTurnOf)', () => {
  const compaction: SessionEvent = { seq: 40, type: 'history/compact', time: 1, data: { summary: 's', firstKeptSeq: 40 } }
  const host = createReferenceHost({ now: () => 1 })
  expect(host.resume(loadedFrom([compaction], 40)).turn).toBe(0)
  const told = createReferenceHost({ now: () => 1 }).resume(loadedFrom([compaction], 40), { lastTurn: 7 })
  told.beginTurn('next')
  expect(told.turn).toBe(8)
})
