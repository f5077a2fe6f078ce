import { describe, expect, test } from 'vitest'
import { computeClosers, INTERRUPTED_TOOL_TEXT, type SessionEvent, toModelHistory, UNANSWERED_TOOL_TEXT } from '../src/index.js'

let seq = 0
const e = (type: string, data?: SessionEvent['data']): SessionEvent => ({ seq: seq++, type, time: 1, ...(data === undefined ? {} : { data }) })
const call = (callId: string) => ({ type: 'tool-call', callId, name: 'bash', arguments: { cmd: callId } })

describe('toModelHistory (docs/contract.md §7)', () => {
  test('one message per system, user, assistant message and tool result; chunks and other types never', () => {
    seq = 0
    const events = [
      e('request/header', { header: { model: 'a' }, reason: 'initial' }),
      e('system/message', { content: 'be brief' }),
      e('turn/start', { turn: 1 }),
      e('user/message', { content: [{ type: 'text', text: 'hi' }] }),
      e('assistant/chunk', { turn: 1, step: 0, chunk: { delta: 'he' } }),
      e('assistant/chunk', { turn: 1, step: 0, chunk: { delta: 'llo' } }),
      e('assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'hello' }, call('c1')] }),
      e('tool/call', { turn: 1, step: 0, callId: 'c1', name: 'bash', arguments: {} }),
      e('tool/result', { turn: 1, step: 0, callId: 'c1', content: [{ type: 'text', text: 'ok' }], isError: false }),
      e('vendor/unknown', { anything: true }),
      e('turn/end', { turn: 1, reason: { kind: 'completed' } }),
      e('request/header', { header: { model: 'b' }, reason: 'change' }),
    ]
    const { messages, requestHeader } = toModelHistory(events)
    expect(messages).toEqual([
      { role: 'system', seq: 1, content: 'be brief' },
      { role: 'user', seq: 3, content: [{ type: 'text', text: 'hi' }] },
      { role: 'assistant', seq: 6, content: [{ type: 'text', text: 'hello' }, call('c1')] },
      { role: 'tool', seq: 8, content: [{ type: 'text', text: 'ok' }], callId: 'c1', isError: false },
    ])
    expect(requestHeader).toEqual({ model: 'b' })
  })

  test('after a repair, each interrupted call has exactly one tool message with the recorded text', () => {
    seq = 0
    const events = [
      e('turn/start', { turn: 1 }),
      e('step/start', { turn: 1, step: 0 }),
      e('assistant/message', { turn: 1, step: 0, content: [call('a'), call('b')] }),
      e('tool/result', { turn: 1, step: 0, callId: 'a', content: [{ type: 'text', text: 'done' }] }),
    ]
    const repaired = [...events, ...computeClosers(events, 0)]
    const tools = toModelHistory(repaired).messages.filter((m) => m.role === 'tool')
    expect(tools.map((m) => [m.callId, m.isError ?? false, m.synthetic ?? false])).toEqual([
      ['a', false, false],
      ['b', true, false],
    ])
    expect(tools[1]?.content).toEqual([{ type: 'text', text: INTERRUPTED_TOOL_TEXT }])
  })

  test('a call never answered outside a repair gets a synthetic result right after the other results of its message', () => {
    seq = 0
    const events = [
      e('turn/start', { turn: 1 }),
      e('assistant/message', { turn: 1, step: 0, content: [call('x'), call('y'), call('z')] }),
      e('tool/result', { turn: 1, step: 0, callId: 'y', content: [] }),
      e('turn/end', { turn: 1, reason: { kind: 'aborted' } }),
      e('turn/start', { turn: 2 }),
      e('user/message', { content: 'again' }),
    ]
    const { messages } = toModelHistory(events)
    expect(messages.map((m) => `${m.role}:${m.callId ?? ''}:${m.synthetic ? 'synthetic' : m.seq}`)).toEqual([
      'assistant::1',
      'tool:y:2',
      'tool:x:synthetic',
      'tool:z:synthetic',
      'user::5',
    ])
    expect(messages[2]).toEqual({ role: 'tool', callId: 'x', isError: true, synthetic: true, content: [{ type: 'text', text: UNANSWERED_TOOL_TEXT }] })
  })

  test('calls recorded only as tool/call (a crash in the tool, before the step message) get a synthetic assistant message, so the repair result has its call', () => {
    seq = 0
    const events = [
      e('turn/start', { turn: 1 }),
      e('user/message', { content: 'run both' }),
      e('step/start', { turn: 1, step: 0 }),
      e('tool/call', { turn: 1, step: 0, callId: 'p', name: 'bash', arguments: { cmd: 'p' } }),
      e('tool/call', { turn: 1, step: 0, callId: 'q', name: 'ls', arguments: {} }),
    ]
    const repaired = [...events, ...computeClosers(events, 1)]
    const { messages } = toModelHistory(repaired)
    expect(messages.map((m) => [m.role, m.callId ?? null, m.synthetic ?? false])).toEqual([
      ['user', null, false],
      ['assistant', null, true],
      ['tool', 'p', false],
      ['tool', 'q', false],
    ])
    expect(messages[1]!.content).toEqual([
      { type: 'tool-call', callId: 'p', name: 'bash', arguments: { cmd: 'p' } },
      { type: 'tool-call', callId: 'q', name: 'ls', arguments: {} },
    ])
    expect(messages[2]!.content).toEqual([{ type: 'text', text: INTERRUPTED_TOOL_TEXT }])
  })

  test('a tool/call written before the assistant message that holds it adds no message of its own', () => {
    seq = 0
    const events = [
      e('turn/start', { turn: 1 }),
      e('tool/call', { turn: 1, step: 0, callId: 'c', name: 'bash', arguments: { cmd: 'c' } }),
      e('assistant/message', { turn: 1, step: 0, content: [call('c')] }),
      e('tool/result', { turn: 1, step: 0, callId: 'c', content: [{ type: 'text', text: 'ok' }] }),
      e('turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ]
    const { messages } = toModelHistory(events)
    expect(messages.map((m) => [m.role, m.seq])).toEqual([
      ['assistant', 2],
      ['tool', 3],
    ])
  })

  test('an unanswered call recorded only as tool/call gets both the synthetic call and the synthetic result', () => {
    seq = 0
    const events = [
      e('turn/start', { turn: 1 }),
      e('tool/call', { turn: 1, step: 0, callId: 'x', name: 'bash', arguments: {} }),
      e('turn/end', { turn: 1, reason: { kind: 'aborted' } }),
      e('user/message', { content: 'next' }),
    ]
    const { messages } = toModelHistory(events)
    expect(messages.map((m) => [m.role, m.callId ?? null, m.synthetic ?? false])).toEqual([
      ['assistant', null, true],
      ['tool', 'x', true],
      ['user', null, false],
    ])
    expect(messages[1]!.content).toEqual([{ type: 'text', text: UNANSWERED_TOOL_TEXT }])
  })

  test('malformed data never throws: the storage is vocabulary-agnostic', () => {
    seq = 0
    const events = [e('assistant/message', 5), e('tool/result'), e('user/message', [1]), e('request/header', 'x'), e('assistant/message', { content: [null, 3, { type: 'tool-call' }] })]
    // The tool/result without data has no callId, so no call to answer: left out (§7).
    expect(toModelHistory(events).messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant'])
    expect(computeClosers([e('turn/start', 'weird'), e('assistant/message', { content: 'no' }), e('tool/call', null)], 0)).toHaveLength(1)
  })

  test('history/rewind: the messages of events with to <= seq < the rewind are left out; the request header is kept', () => {
    seq = 0
    const events = [
      e('request/header', { header: { model: 'a' }, reason: 'initial' }),
      e('user/message', { content: 'one' }),
      e('assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'first' }] }),
      e('request/header', { header: { model: 'b' }, reason: 'change' }),
      e('user/message', { content: 'two' }),
      e('history/rewind', { to: 3 }), // drops seq 3 and 4
      e('user/message', { content: 'three' }),
    ]
    const { messages, requestHeader } = toModelHistory(events)
    expect(messages.map((m) => m.seq)).toEqual([1, 2, 6])
    expect(requestHeader).toEqual({ model: 'b' })
  })

  test('history/rewind that drops an assistant message but not its result: the result goes too', () => {
    seq = 0
    const events = [
      e('user/message', { content: 'q' }),
      e('assistant/message', { turn: 1, step: 0, content: [call('a')] }),
      e('history/rewind', { to: 1 }), // undo while the tool ran
      e('tool/result', { turn: 1, step: 0, callId: 'a', content: [{ type: 'text', text: 'late' }] }),
      e('user/message', { content: 'r' }),
    ]
    expect(toModelHistory(events).messages.map((m) => `${m.role}:${m.seq}`)).toEqual(['user:0', 'user:4'])
  })

  test('history/rewind that drops a result but not its assistant message: the call gets a synthetic result', () => {
    seq = 0
    const events = [
      e('assistant/message', { turn: 1, step: 0, content: [call('a'), call('b')] }),
      e('tool/result', { turn: 1, step: 0, callId: 'a', content: [] }),
      e('tool/result', { turn: 1, step: 0, callId: 'b', content: [] }),
      e('history/rewind', { to: 2 }),
      e('user/message', { content: 'next' }),
    ]
    const { messages } = toModelHistory(events)
    expect(messages.map((m) => `${m.role}:${m.callId ?? ''}:${m.synthetic ? 'synthetic' : m.seq}`)).toEqual(['assistant::0', 'tool:a:1', 'tool:b:synthetic', 'user::4'])
  })

  test('history/rewind: rewinds only remove (a later one covering an earlier rewind does not undo it); a malformed to is ignored', () => {
    seq = 0
    const events = [
      e('user/message', { content: '0' }),
      e('user/message', { content: '1' }),
      e('history/rewind', { to: 1 }),
      e('user/message', { content: '3' }),
      e('history/rewind', { to: 2 }), // covers the first rewind and seq 3
      e('history/rewind', { to: -1 }),
      e('history/rewind', { to: '0' }),
      e('history/rewind', { to: 0.5 }),
      e('history/rewind'),
      e('history/rewind', { to: 99 }), // past itself: nothing
      e('user/message', { content: '10' }),
    ]
    expect(toModelHistory(events).messages.map((m) => m.seq)).toEqual([0, 10])
  })
})
