import { describe, expect, test } from 'vitest'
import { makeStyle } from '../src/cli/render.js'
import { renderTranscript } from '../src/cli/transcript.js'
import type { LoadedSession, SessionEvent } from '../src/index.js'

const ev = (seq: number, type: string, data: unknown, ignorable = false): SessionEvent =>
  ({ seq, type, time: 1_000 + seq, data, ...(ignorable ? { ignorable: true } : {}) }) as SessionEvent

describe('show: events of types the transcript does not know', () => {
  test('a run of one type with nothing printed in between is one line with its count', () => {
    const events = [
      ev(0, 'turn/start', { turn: 1 }),
      ev(1, 'tool/output', { part: 0 }, true),
      ev(2, 'assistant/chunk', { turn: 1, step: 0, chunk: { type: 'text-delta', text: 'x' } }), // prints nothing
      ev(3, 'tool/output', { part: 1 }, true),
      ev(4, 'tool/output', { part: 2 }, true),
      ev(5, 'user/message', { content: 'hi' }),
      ev(6, 'tool/output', { part: 3 }, true),
      ev(7, 'x/custom', { a: 1 }),
      ev(8, 'x/custom', { a: 2 }, true),
    ]
    const session = { meta: { id: 's', createdAt: 0, delegationDepth: 0 }, events } as unknown as LoadedSession
    const lines = renderTranscript(session, makeStyle(false)).split('\n')
    expect(lines.filter((l) => l.startsWith('('))).toEqual([
      '(tool/output ×3, ignorable) {"part":0}',
      '(tool/output, ignorable) {"part":3}',
      '(x/custom ×2) {"a":1}', // not every event of the run is ignorable
    ])
    expect(lines.indexOf('user: hi')).toBeGreaterThan(lines.indexOf('(tool/output ×3, ignorable) {"part":0}'))
  })
})

describe('show: history/rewind', () => {
  test('rewound messages (tool results too) are marked; each rewind says what it dropped, or why it is ignored', () => {
    const events = [
      ev(0, 'user/message', { content: 'q' }),
      ev(1, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'c', name: 'bash', arguments: {} }] }),
      ev(2, 'tool/result', { turn: 1, step: 0, callId: 'c', content: [{ type: 'text', text: 'out' }] }),
      ev(3, 'history/rewind', { to: 1 }),
      ev(4, 'history/rewind', { to: 'x' }),
      ev(5, 'history/rewind', { to: 9 }),
      ev(6, 'user/message', { content: 'again' }),
    ]
    const session = { meta: { id: 's', createdAt: 0, delegationDepth: 0 }, events } as unknown as LoadedSession
    const lines = renderTranscript(session, makeStyle(false)).split('\n')
    expect(lines).toContain('user: q')
    expect(lines).toContain('assistant [rewound]')
    expect(lines).toContain('  ← [c] out [rewound]')
    expect(lines).toContain("↶ history rewound to seq 1: 2 message(s) from seq 1 to 2 are out of the model's history")
    expect(lines).toContain('↶ history rewind with an invalid \'to\' ("x"): ignored')
    expect(lines).toContain('↶ history rewind to seq 9: nothing before it to drop')
    expect(lines).toContain('user: again')
  })
})
