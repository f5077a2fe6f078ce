import { describe, expect, test } from 'vitest'
import { sameText } from '../src/postgres/append-batch.js'
import { prepareBatch, serializeEvents } from '../src/session/prepare-batch.js'
import { ev } from './helpers/events.js'

// The PostgreSQL backend sends a batch's lines as `serializeEvents` gives them: text for an
// ordinary batch, the UTF-8 bytes for one of a megabyte of JSON or more (a huge line is not held
// again as text, §15.5). Both must be exactly the lines the JSONL backend writes (copy is
// byte-identical both ways), and `bytes` their size in a file.

const bytesOf = (lines: string | Buffer) => (typeof lines === 'string' ? Buffer.from(lines) : lines)

describe.each([0, 1] as const)('version %i', (version) => {
  const batches = {
    small: [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'héllo ✓ "quoted" \\ back' })],
    'one huge line': [ev(0, 'tool/result', { callId: 'c', content: [{ type: 'text', text: 'ü'.repeat(1_100_000) }] })],
    'huge among small': [ev(3, 'turn/start', { turn: 2 }), ev(4, 'tool/result', { callId: 'c', content: [{ type: 'text', text: 'x'.repeat(1_100_000) }] }), ev(5, 'turn/end', { turn: 2, reason: { kind: 'completed' } })],
  }
  test.each(Object.entries(batches))('%s: the lines are the JSONL lines, joined by \\n, and bytes their file size', (name, events) => {
    const jsonl = prepareBatch('s', events, version).bytes
    const { lines, bytes, firstSeq, count } = serializeEvents('s', events, version)
    expect(typeof lines === 'string').toBe(name === 'small')
    expect(bytesOf(lines).equals(jsonl.subarray(0, jsonl.length - 1))).toBe(true)
    expect([bytes, firstSeq, count]).toEqual([jsonl.length, events[0]!.seq, events.length])
  })
})

test('sameText compares text and bytes by their UTF-8 bytes', () => {
  expect(sameText('a\nü', Buffer.from('a\nü'))).toBe(true)
  expect(sameText(Buffer.from('a\nü'), 'a\nü')).toBe(true)
  expect(sameText('a\nü', 'a\nü')).toBe(true)
  expect(sameText('a\nü', Buffer.from('a\nu'))).toBe(false)
  expect(sameText(Buffer.from('ab'), Buffer.from('a'))).toBe(false)
})
