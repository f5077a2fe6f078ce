import { describe, expect, test } from 'vitest'
import { makeStyle, renderTranscript } from '../src/cli/render.js'
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
