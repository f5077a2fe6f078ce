import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { type SessionEvent, toModelHistory, UNANSWERED_TOOL_TEXT } from '../src/index.js'

// Property tests of `history/rewind` in the model history (docs/contract.md §2.1, §7). The
// oracle is written from the contract's words, not from the implementation: an event is out of
// the view when some well-formed rewind R has `R.data.to <= seq < R.seq`.

type Block =
  | { kind: 'user' | 'system' | 'chunk' | 'turn' }
  | { kind: 'assistant'; calls: number; answered: number[]; late: boolean }
  | { kind: 'rewind'; at: number }
  | { kind: 'bad-rewind'; to: unknown }

const block: fc.Arbitrary<Block> = fc.oneof(
  fc.constantFrom<Block>({ kind: 'user' }, { kind: 'system' }, { kind: 'chunk' }, { kind: 'turn' }),
  fc
    .integer({ min: 0, max: 3 })
    .chain((calls) =>
      fc.record({
        kind: fc.constant('assistant' as const),
        calls: fc.constant(calls),
        answered: fc.shuffledSubarray([...Array(calls).keys()]),
        late: fc.boolean(),
      }),
    ),
  fc.record({ kind: fc.constant('rewind' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
  fc.record({ kind: fc.constant('bad-rewind' as const), to: fc.constantFrom(-1, 1.5, '3', null, Number.MAX_VALUE) }),
)

interface Built {
  events: SessionEvent[]
  /** call id -> seq of the assistant message that opened it */
  openedAt: Map<string, number>
}

function build(blocks: Block[]): Built {
  const events: SessionEvent[] = []
  const openedAt = new Map<string, number>()
  const push = (type: string, data: SessionEvent['data']) => events.push({ seq: events.length, type, time: 1, data })
  let callNo = 0
  // Results of a `late` assistant message wait while rewinds and chunks are appended, so a
  // rewind can fall between a call and its result (an undo while a tool ran).
  let pending: (() => void)[] = []
  const flush = () => {
    for (const write of pending) write()
    pending = []
  }
  for (const b of blocks) {
    if (!['rewind', 'bad-rewind', 'chunk'].includes(b.kind)) flush()
    switch (b.kind) {
      case 'user':
        push('user/message', { content: `u${events.length}` })
        break
      case 'system':
        push('system/message', { content: `s${events.length}` })
        break
      case 'chunk':
        push('assistant/chunk', { turn: 1, step: 0, chunk: 'x' })
        break
      case 'turn':
        push('turn/end', { turn: 1, reason: { kind: 'completed' } })
        break
      case 'assistant': {
        const ids = Array.from({ length: b.calls }, () => `c${callNo++}`)
        for (const id of ids) openedAt.set(id, events.length)
        push('assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'a' }, ...ids.map((callId) => ({ type: 'tool-call', callId, name: 't', arguments: {} }))] })
        for (const i of b.answered) pending.push(() => push('tool/result', { turn: 1, step: 0, callId: ids[i]!, content: [{ type: 'text', text: `r${i}` }] }))
        if (!b.late) flush()
        break
      }
      case 'rewind':
        push('history/rewind', { to: Math.floor(b.at * events.length) }) // to <= own seq
        break
      case 'bad-rewind':
        push('history/rewind', { to: b.to as number })
        break
    }
  }
  flush()
  return { events, openedAt }
}

function hiddenByContract(events: readonly SessionEvent[]): (seq: number) => boolean {
  const rewinds = events.filter((e) => e.type === 'history/rewind').map((e) => ({ to: (e.data as { to: unknown }).to, seq: e.seq }))
  const valid = rewinds.filter((r): r is { to: number; seq: number } => Number.isSafeInteger(r.to) && (r.to as number) >= 0)
  return (seq) => valid.some((r) => r.to <= seq && seq < r.seq)
}

const logs = fc.array(block, { maxLength: 40 }).map(build)

describe('history/rewind in toModelHistory (properties)', () => {
  test('system, user and assistant messages are exactly the events no rewind covers, in log order', () => {
    fc.assert(
      fc.property(logs, ({ events }) => {
        const hidden = hiddenByContract(events)
        const expected = events.filter((e) => ['system/message', 'user/message', 'assistant/message'].includes(e.type) && !hidden(e.seq)).map((e) => e.seq)
        const got = toModelHistory(events).messages.filter((m) => m.role !== 'tool').map((m) => m.seq)
        expect(got).toEqual(expected)
      }),
      { numRuns: 500 },
    )
  })

  test('the history stays balanced: each shown call gets exactly one tool message right after its assistant message', () => {
    fc.assert(
      fc.property(logs, ({ events }) => {
        const { messages } = toModelHistory(events)
        const bySeq = new Map(events.map((e) => [e.seq, e]))
        let expectedCalls: string[] | undefined // calls of the assistant message the tool messages follow
        let seen: string[] = []
        const closeGroup = () => {
          if (expectedCalls) expect([...seen].sort()).toEqual([...expectedCalls].sort())
          expectedCalls = undefined
          seen = []
        }
        for (const m of messages) {
          if (m.role === 'tool') {
            expect(expectedCalls).toBeDefined() // never a result without the call before it
            seen.push(m.callId!)
            continue
          }
          closeGroup()
          if (m.role === 'assistant') {
            const content = (bySeq.get(m.seq!)!.data as { content: { type: string; callId?: string }[] }).content
            expectedCalls = content.filter((b) => b.type === 'tool-call').map((b) => b.callId!)
          }
        }
        closeGroup()
      }),
      { numRuns: 500 },
    )
  })

  test('a recorded result is shown exactly when neither it nor its call was rewound; otherwise the call gets a synthetic result', () => {
    fc.assert(
      fc.property(logs, ({ events, openedAt }) => {
        const hidden = hiddenByContract(events)
        const { messages } = toModelHistory(events)
        const results = events.filter((e) => e.type === 'tool/result')
        const expectedShown = results.filter((r) => !hidden(r.seq) && !hidden(openedAt.get((r.data as { callId: string }).callId)!)).map((r) => r.seq)
        expect(messages.filter((m) => m.role === 'tool' && !m.synthetic).map((m) => m.seq)).toEqual(expectedShown)
        const shownResultCalls = new Set(results.filter((r) => !hidden(r.seq)).map((r) => (r.data as { callId: string }).callId))
        const expectedSynthetic = [...openedAt].filter(([callId, seq]) => !hidden(seq) && !shownResultCalls.has(callId)).map(([callId]) => callId)
        const synthetic = messages.filter((m) => m.synthetic)
        expect(synthetic.map((m) => m.callId).sort()).toEqual(expectedSynthetic.sort())
        for (const m of synthetic) expect(m).toEqual({ role: 'tool', callId: m.callId, isError: true, synthetic: true, content: [{ type: 'text', text: UNANSWERED_TOOL_TEXT }] })
      }),
      { numRuns: 500 },
    )
  })

  test('rewinds only remove: appending a rewind never brings a message back, and one covering nothing new changes nothing', () => {
    fc.assert(
      fc.property(logs, fc.double({ min: 0, max: 1, noNaN: true }), ({ events }, at) => {
        const before = toModelHistory(events).messages
        const seq = events.length
        const rewind: SessionEvent = { seq, type: 'history/rewind', time: 1, data: { to: Math.floor(at * seq) } }
        const after = toModelHistory([...events, rewind]).messages
        const realSeqs = (ms: typeof before) => new Set(ms.filter((m) => !m.synthetic).map((m) => m.seq))
        const beforeSeqs = realSeqs(before)
        for (const s of realSeqs(after)) expect(beforeSeqs.has(s)).toBe(true)
        const empty: SessionEvent = { seq, type: 'history/rewind', time: 1, data: { to: seq } }
        expect(toModelHistory([...events, empty]).messages).toEqual(before)
      }),
      { numRuns: 300 },
    )
  })
})

describe('history/rewind of a call recorded only as tool/call', () => {
  const ev = (seq: number, type: string, data: SessionEvent['data']): SessionEvent => ({ seq, type, time: 1, data })
  test('a rewound tool/call takes its later result with it: no result without its call', () => {
    const events = [
      ev(0, 'user/message', { content: 'go' }),
      ev(1, 'tool/call', { turn: 1, step: 0, callId: 'x', name: 't', arguments: {} }),
      ev(2, 'history/rewind', { to: 1 }),
      ev(3, 'tool/result', { turn: 1, step: 0, callId: 'x', content: [{ type: 'text', text: 'late' }] }),
      ev(4, 'user/message', { content: 'again' }),
    ]
    expect(toModelHistory(events).messages.map((m) => [m.role, m.seq])).toEqual([
      ['user', 0],
      ['user', 4],
    ])
  })
})
