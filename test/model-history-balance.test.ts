import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { type SessionEvent, toModelHistory, UNANSWERED_TOOL_TEXT } from '../src/index.js'
import { turnStep } from './helpers/turn-arbitraries.js'

// The model history is balanced for every storable log (docs/contract.md §7): each tool call of
// a shown assistant message gets exactly one tool message, right after that message's other
// results, and no tool message lacks its call; with or without a compaction.

const ev = (seq: number, type: string, data?: SessionEvent['data']): SessionEvent => ({ seq, type, time: 1, ...(data === undefined ? {} : { data }) })
const call = (callId: string) => ({ type: 'tool-call', callId, name: 'f', arguments: {} })
const text = (t: string) => [{ type: 'text', text: t }]
const label = (events: readonly SessionEvent[]) =>
  toModelHistory(events).messages.map((m) => `${m.role}:${m.callId ?? ''}:${m.synthetic ? 'synthetic' : m.seq}`)

/** The log with a compaction appended that keeps everything (firstKeptSeq 0). */
const compactedKeepingAll = (events: readonly SessionEvent[]) => [...events, ev((events.at(-1)?.seq ?? -1) + 1, 'history/compact', { summary: 'S', firstKeptSeq: 0 })]

describe('toModelHistory stays balanced on odd but storable logs', () => {
  test('A: a result whose callId no event holds is left out, with a compaction and without', () => {
    const events = [
      ev(0, 'turn/start', { turn: 1 }),
      ev(1, 'user/message', { content: 'hi' }),
      ev(2, 'assistant/message', { turn: 1, step: 0, content: text('x') }),
      ev(3, 'tool/result', { turn: 1, step: 0, callId: 'ghost', content: [] }),
      ev(4, 'tool/result', { turn: 1, step: 0, content: [] }), // no callId at all
      ev(5, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ]
    expect(label(events)).toEqual(['user::1', 'assistant::2'])
    expect(label(compactedKeepingAll(events))).toEqual(['user::6', 'user::1', 'assistant::2'])
  })

  test('A: a result recorded before any call with its id is left out; the later call gets the synthetic result', () => {
    const events = [ev(0, 'user/message', { content: 'hi' }), ev(1, 'tool/result', { callId: 'c1', content: text('early') }), ev(2, 'assistant/message', { content: [call('c1')] })]
    expect(label(events)).toEqual(['user::0', 'assistant::2', 'tool:c1:synthetic'])
  })

  test('B: two results for one call give one tool message, the first recorded', () => {
    const events = [
      ev(0, 'user/message', { content: 'hi' }),
      ev(1, 'assistant/message', { content: [call('c1')] }),
      ev(2, 'tool/result', { callId: 'c1', content: text('r1') }),
      ev(3, 'tool/result', { callId: 'c1', content: text('r2'), isError: true }),
      ev(4, 'user/message', { content: 'next' }),
    ]
    const { messages } = toModelHistory(events)
    expect(label(events)).toEqual(['user::0', 'assistant::1', 'tool:c1:2', 'user::4'])
    expect(messages[2]).toEqual({ role: 'tool', seq: 2, callId: 'c1', content: text('r1') })
  })

  test('B: once the first result is rewound, the next one recorded answers the call', () => {
    const events = [
      ev(0, 'assistant/message', { content: [call('c1')] }),
      ev(1, 'tool/result', { callId: 'c1', content: text('r1') }),
      ev(2, 'history/rewind', { to: 1 }),
      ev(3, 'tool/result', { callId: 'c1', content: text('r2') }),
    ]
    expect(label(events)).toEqual(['assistant::0', 'tool:c1:3'])
  })

  test('C: a result recorded after a later user message is shown right after its call, with the other results in the order recorded', () => {
    const events = [
      ev(0, 'user/message', { content: 'hi' }),
      ev(1, 'assistant/message', { content: [call('c1'), call('c2'), call('c3')] }),
      ev(2, 'tool/result', { callId: 'c2', content: [] }),
      ev(3, 'user/message', { content: 'hurry' }),
      ev(4, 'tool/result', { callId: 'c1', content: [] }),
      ev(5, 'assistant/message', { content: text('ok') }),
    ]
    expect(label(events)).toEqual(['user::0', 'assistant::1', 'tool:c2:2', 'tool:c1:4', 'tool:c3:synthetic', 'user::3', 'assistant::5'])
    expect(label(compactedKeepingAll(events)).slice(1)).toEqual(label(events))
  })

  test('I: a callId reused by a later assistant message is a new call: it gets its own result, synthetic when none comes', () => {
    const events = [
      ev(0, 'user/message', { content: 'hi' }),
      ev(1, 'assistant/message', { content: [call('c1')] }),
      ev(2, 'tool/result', { callId: 'c1', content: text('first') }),
      ev(3, 'assistant/message', { content: [call('c1')] }),
    ]
    const { messages } = toModelHistory(events)
    expect(label(events)).toEqual(['user::0', 'assistant::1', 'tool:c1:2', 'assistant::3', 'tool:c1:synthetic'])
    expect(messages[4]).toEqual({ role: 'tool', callId: 'c1', isError: true, synthetic: true, content: text(UNANSWERED_TOOL_TEXT) })
    // A result recorded after the second message answers it, not the first.
    const answered = [...events, ev(4, 'tool/result', { callId: 'c1', content: text('second') })]
    expect(label(answered)).toEqual(['user::0', 'assistant::1', 'tool:c1:2', 'assistant::3', 'tool:c1:4'])
    // If the first call was never answered, it gets the synthetic result and the late one goes to the second.
    const firstOpen = [events[0]!, events[1]!, events[3]!, ev(4, 'tool/result', { callId: 'c1', content: [] })]
    expect(label(firstOpen)).toEqual(['user::0', 'assistant::1', 'tool:c1:synthetic', 'assistant::3', 'tool:c1:4'])
  })

  test('I: a result after a rewound message reusing the id goes with it; the earlier shown call gets the synthetic result', () => {
    const events = [
      ev(0, 'assistant/message', { content: [call('c1')] }),
      ev(1, 'assistant/message', { content: [call('c1')] }),
      ev(2, 'history/rewind', { to: 1 }),
      ev(3, 'tool/result', { callId: 'c1', content: [] }),
    ]
    expect(label(events)).toEqual(['assistant::0', 'tool:c1:synthetic'])
  })
})

// Random logs: the shapes closers read (turn-arbitraries, malformed data included) mixed with
// messages whose calls reuse a few ids, results that are stray (an id no call holds, no id),
// duplicated or late (after later messages), lone tool/calls, rewinds and compactions.
const id = fc.constantFrom('a', 'b', 'c', 'ghost')
const step = fc.oneof(
  { weight: 2, arbitrary: turnStep },
  { weight: 2, arbitrary: fc.record({ type: fc.constantFrom('user/message', 'system/message'), data: fc.constant({ content: 'm' }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      type: fc.constant('assistant/message'),
      data: fc.record({ content: fc.array(fc.oneof(id.map(call), fc.constant({ type: 'text', text: 't' })), { maxLength: 3 }) }),
    }),
  },
  { weight: 4, arbitrary: fc.record({ type: fc.constant('tool/result'), data: fc.record({ callId: fc.option(id, { nil: undefined }), content: fc.constant(text('r')) }, { requiredKeys: ['content'] }) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('tool/call'), data: fc.record({ callId: id, name: fc.constant('f'), arguments: fc.constant({}) }) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('history/rewind'), data: fc.record({ to: fc.nat(30) }) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('history/compact'), data: fc.record({ summary: fc.constant('S'), firstKeptSeq: fc.nat(30) }) }) },
)
const logs = fc.array(step, { maxLength: 30 }).map((steps) => steps.map((s, seq) => ({ seq, time: 1, ...s }) as SessionEvent))

/** The ids of an assistant message's tool calls as §6.1 reads them (each once, strings only). */
function callIdsOf(content: unknown): string[] {
  if (!Array.isArray(content)) return []
  const ids: string[] = []
  for (const b of content) {
    const callId = (b as { type?: unknown; callId?: unknown } | null)?.type === 'tool-call' ? (b as { callId: unknown }).callId : undefined
    if (typeof callId === 'string' && !ids.includes(callId)) ids.push(callId)
  }
  return ids
}

describe('toModelHistory is balanced on every log (property)', () => {
  test('every tool message follows the assistant message holding its call, and every shown call has exactly one', () => {
    fc.assert(
      fc.property(logs, (events) => {
        const { messages } = toModelHistory(events)
        let open: string[] | undefined // calls of the assistant message the tool messages follow
        let answered: string[] = []
        const close = () => {
          if (open) expect([...answered].sort()).toEqual([...open].sort())
          open = undefined
          answered = []
        }
        for (const m of messages) {
          if (m.role === 'tool') {
            expect(open).toBeDefined() // never a result before any call
            expect(open).toContain(m.callId)
            expect(answered).not.toContain(m.callId) // one tool message per call
            answered.push(m.callId!)
            continue
          }
          close()
          if (m.role === 'assistant') open = callIdsOf(m.content)
        }
        close()
      }),
      { numRuns: 1000 },
    )
  })

  test('each recorded result is shown at most once, as recorded; the rest of the log keeps its order', () => {
    fc.assert(
      fc.property(logs, (events) => {
        const { messages } = toModelHistory(events)
        const bySeq = new Map(events.map((e) => [e.seq, e]))
        const real = messages.filter((m) => m.synthetic !== true && m.compaction !== true)
        const toolSeqs = real.filter((m) => m.role === 'tool').map((m) => m.seq!)
        expect(new Set(toolSeqs).size).toBe(toolSeqs.length)
        for (const m of real.filter((m) => m.role === 'tool')) {
          const e = bySeq.get(m.seq!)!
          expect(e.type).toBe('tool/result')
          expect((e.data as { callId: unknown }).callId).toBe(m.callId)
          expect(m.content).toEqual((e.data as { content?: unknown }).content ?? null)
        }
        const others = real.filter((m) => m.role !== 'tool').map((m) => m.seq!)
        expect(others).toEqual([...others].sort((a, b) => a - b))
        for (const m of messages.filter((m) => m.synthetic === true && m.role === 'tool')) {
          expect(m).toEqual({ role: 'tool', callId: m.callId, isError: true, synthetic: true, content: text(UNANSWERED_TOOL_TEXT) })
        }
      }),
      { numRuns: 1000 },
    )
  })

  test('the same with and without a compaction: one that keeps every event adds only its summary', () => {
    fc.assert(
      fc.property(logs, (drawn) => {
        // Without a compaction of its own (one in the log would be in force instead).
        const events = drawn.filter((e) => e.type !== 'history/compact')
        const plain = toModelHistory(events).messages
        const compacted = toModelHistory(compactedKeepingAll(events)).messages
        expect(compacted[0]).toMatchObject({ role: 'user', compaction: true })
        expect(compacted.slice(1)).toEqual(plain)
      }),
      { numRuns: 1000 },
    )
  })
})
