import { generateText, type ModelMessage } from 'ai'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { messagesToDrafts, toAiSdkMessages, WRAPPED_PART } from '../src/adapters/ai-sdk/index.js'
import { computeClosers, INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import type { JsonValue, SessionEvent } from '../src/session/schema.js'
import { UNANSWERED_TOOL_TEXT } from '../src/session/history.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'

let clock = 0
const ev = (seq: number, type: string, data?: JsonValue): SessionEvent =>
  data === undefined ? { seq, type, time: ++clock } : { seq, type, time: ++clock, data }
const log = (...items: [string, JsonValue?][]): SessionEvent[] => items.map(([type, data], i) => ev(i, type, data))
/** What JSON can hold of a value (a -0 is 0): the form the log keeps. */
const asJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T
const asEvents = (messages: readonly ModelMessage[]): SessionEvent[] =>
  messagesToDrafts(messages, { turn: 1, step: 0 }).map((d, i) => ({ seq: i, type: d.type, time: 0, data: d.data, ...(d.ignorable ? { ignorable: true as const } : {}) }))

describe('toAiSdkMessages', () => {
  it('maps each kind of message to its AI SDK 6 shape', () => {
    const events = log(
      ['system/message', { content: 'Be brief.' }],
      ['turn/start', { turn: 1 }],
      ['user/message', { content: 'Weather?' }],
      ['assistant/message', { turn: 1, step: 0, content: [
        { type: 'reasoning', text: 'need a tool' },
        { type: 'text', text: 'Checking.' },
        { type: 'tool-call', callId: 'a', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'tool-call', callId: 'b', name: 'weather', arguments: { city: 'Rome' } },
      ] }],
      ['tool/result', { turn: 1, step: 0, callId: 'a', content: [{ type: 'text', text: 'rain' }] }],
      ['tool/result', { turn: 1, step: 0, callId: 'b', content: [{ type: 'text', text: 'timeout' }], isError: true }],
      ['assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: 'x' } }],
      ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
    )
    expect(toAiSdkMessages(events)).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: [
        { type: 'reasoning', text: 'need a tool' },
        { type: 'text', text: 'Checking.' },
        { type: 'tool-call', toolCallId: 'a', toolName: 'weather', input: { city: 'Oslo' } },
        { type: 'tool-call', toolCallId: 'b', toolName: 'weather', input: { city: 'Rome' } },
      ] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 'weather', output: { type: 'text', value: 'rain' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'b', toolName: 'weather', output: { type: 'error-text', value: 'timeout' } }] },
    ])
  })

  it('answers a call the run never answered, after the results of its message', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['user/message', { content: 'go' }],
      ['assistant/message', { turn: 1, step: 0, content: [
        { type: 'tool-call', callId: 'a', name: 't', arguments: {} },
        { type: 'tool-call', callId: 'b', name: 't', arguments: {} },
      ] }],
      ['tool/result', { turn: 1, step: 0, callId: 'b', content: [{ type: 'text', text: 'ok' }] }],
      ['turn/end', { turn: 1, reason: { kind: 'aborted' } }],
      ['user/message', { content: 'next' }],
    )
    const out = toAiSdkMessages(events)
    expect(out.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'user'])
    expect(out[3]).toEqual({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 't', output: { type: 'error-text', value: UNANSWERED_TOOL_TEXT } }] })
  })

  it('rebuilds the assistant message of calls recorded only by tool/call, answered by the crash closers', () => {
    const kept = log(
      ['turn/start', { turn: 1 }],
      ['user/message', { content: 'go' }],
      ['step/start', { turn: 1, step: 0 }],
      ['tool/call', { turn: 1, step: 0, callId: 'a', name: 'slow', arguments: { n: 1 } }],
      ['tool/call', { turn: 1, step: 0, callId: 'b', name: 'slow', arguments: { n: 2 } }],
    )
    const repaired = [...kept, ...computeClosers(kept, 0)]
    expect(toAiSdkMessages(repaired)).toEqual([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [
        { type: 'tool-call', toolCallId: 'a', toolName: 'slow', input: { n: 1 } },
        { type: 'tool-call', toolCallId: 'b', toolName: 'slow', input: { n: 2 } },
      ] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 'slow', output: { type: 'error-text', value: INTERRUPTED_TOOL_TEXT } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'b', toolName: 'slow', output: { type: 'error-text', value: INTERRUPTED_TOOL_TEXT } }] },
    ])
  })

  it('leaves out what a history/rewind took back, and results whose call is gone', () => {
    const events = log(
      ['user/message', { content: 'one' }],
      ['assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'a', name: 't', arguments: {} }] }],
      ['tool/result', { turn: 1, step: 0, callId: 'a', content: [{ type: 'text', text: 'ok' }] }],
      ['history/rewind', { to: 1 }],
      ['tool/result', { turn: 1, step: 0, callId: 'a', content: [{ type: 'text', text: 'late' }] }],
      ['user/message', { content: 'two' }],
    )
    expect(toAiSdkMessages(events)).toEqual([
      { role: 'user', content: 'one' },
      { role: 'user', content: 'two' },
    ])
  })

  it('leaves a call open when its approval response closes the history, keeping that response last', () => {
    const events = log(
      ['user/message', { content: 'deploy' }],
      ['assistant/message', { turn: 1, step: 0, content: [
        { type: 'tool-call', callId: 'x', name: 'deploy', arguments: {} },
        { type: 'tool-approval-request', approvalId: 'ap1', toolCallId: 'x' },
        { type: 'tool-call', callId: 'y', name: 'other', arguments: {} },
      ] }],
      ['turn/end', { turn: 1, reason: { kind: 'completed' } }],
      ['ai-sdk/tool-part', { turn: 2, step: -1, part: { type: 'tool-approval-response', approvalId: 'ap1', approved: true } }],
    )
    const out = toAiSdkMessages(events)
    expect(out.slice(2)).toEqual([
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'y', toolName: 'other', output: { type: 'error-text', value: UNANSWERED_TOOL_TEXT } }] },
      { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: 'ap1', approved: true }] },
    ])
    // Without the response, or with a user message after it, the call is answered like any other.
    expect(toAiSdkMessages(events.slice(0, 3)).filter((m) => m.role === 'tool')).toHaveLength(2)
    expect(toAiSdkMessages([...events, ev(4, 'user/message', { content: 'never mind' })]).filter((m) => m.role === 'tool')).toHaveLength(3)
  })

  it('stores binary data as base64, URLs and dates as strings, and a __proto__ key as a plain key', () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "n": 1}') as Record<string, unknown>
    const messages: ModelMessage[] = [
      { role: 'user', content: [
        { type: 'file', data: Buffer.from('hi'), mediaType: 'text/plain' },
        { type: 'image', image: new URL('https://example.com/a.png') },
        { type: 'text', text: 'x', providerOptions: { acme: { at: new Date(0) as never } } },
      ] },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 't', toolName: 'f', input }] },
    ]
    const events = asEvents(messages)
    expect(events[0]?.data).toEqual({ content: [
      { type: 'file', data: 'aGk=', mediaType: 'text/plain' },
      { type: 'image', image: 'https://example.com/a.png' },
      { type: 'text', text: 'x', providerOptions: { acme: { at: '1970-01-01T00:00:00.000Z' } } },
    ] })
    const args = (events[1]?.data as { content: { arguments: Record<string, unknown> }[] }).content[0]!.arguments
    expect(Object.keys(args)).toEqual(['__proto__', 'n'])
    expect(Object.getPrototypeOf(args)).toBe(Object.prototype)
    expect(JSON.stringify(args)).toBe('{"__proto__":{"polluted":true},"n":1}')
  })

  it('keeps a provider-executed call out of the calls to answer, and passes non-text results as content', () => {
    const providerCall = { type: 'tool-call', toolCallId: 'p', toolName: 'web_search', input: { q: 'x' }, providerExecuted: true } as const
    const messages: ModelMessage[] = [
      { role: 'user', content: [{ type: 'image', image: new Uint8Array([1, 2, 3]), mediaType: 'image/png' }] },
      { role: 'assistant', content: [providerCall, { type: 'tool-call', toolCallId: 'c', toolName: 'shot', input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c', toolName: 'shot', output: { type: 'content', value: [{ type: 'text', text: 'see' }, { type: 'image-data', data: 'AAEC', mediaType: 'image/png' }] } }] },
    ]
    const events = asEvents(messages)
    expect((events[1]?.data as { content: JsonValue[] }).content[0]).toEqual({ type: WRAPPED_PART, part: providerCall })
    expect(computeClosers([ev(0, 'turn/start', { turn: 1 }), ...events.map((e) => ({ ...e, seq: e.seq + 1 }))], 0)).toHaveLength(1) // turn/end only
    expect(toAiSdkMessages(events)).toEqual([
      { role: 'user', content: [{ type: 'image', image: 'AQID', mediaType: 'image/png' }] },
      messages[1],
      messages[2],
    ])
  })
})

// ---- property-based round trips ----

const text = fc.string({ maxLength: 12 })
const providerOptions = fc.option(fc.constant({ acme: { cache: true } }), { nil: undefined })
const withOptions = <T extends object>(part: T, options: object | undefined) => (options ? { ...part, providerOptions: options } : part)
const jsonObject = fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) as fc.Arbitrary<Record<string, JsonValue>>

const userMessage: fc.Arbitrary<ModelMessage> = fc.oneof(
  text.map((content) => ({ role: 'user' as const, content })),
  fc
    .array(
      fc.oneof(
        fc.tuple(text, providerOptions).map(([t, o]) => withOptions({ type: 'text' as const, text: t }, o)),
        fc.base64String({ maxLength: 8 }).map((image) => ({ type: 'image' as const, image, mediaType: 'image/png' })),
        fc.base64String({ maxLength: 8 }).map((data) => ({ type: 'file' as const, data, mediaType: 'application/pdf', filename: 'a.pdf' })),
      ),
      { maxLength: 3 },
    )
    .map((content) => ({ role: 'user' as const, content })),
)
const systemMessage: fc.Arbitrary<ModelMessage> = text.map((content) => ({ role: 'system' as const, content }))

/** An assistant message and one tool message per call it makes, each result text or an error. */
const assistantTurn = (prefix: string): fc.Arbitrary<ModelMessage[]> =>
  fc
    .tuple(
      fc.array(fc.oneof(text.map((t) => ({ type: 'text' as const, text: t })), text.map((t) => ({ type: 'reasoning' as const, text: t }))), { maxLength: 2 }),
      fc.array(fc.tuple(fc.constantFrom('read', 'bash'), jsonObject, text, fc.boolean(), providerOptions), { maxLength: 3 }),
    )
    .map(([head, calls]) => [
      {
        role: 'assistant' as const,
        content: [...head, ...calls.map(([name, input], i) => ({ type: 'tool-call' as const, toolCallId: `${prefix}-${i}`, toolName: name, input }))],
      },
      ...calls.map(([name, , value, isError, options], i) => ({
        role: 'tool' as const,
        content: [withOptions({ type: 'tool-result' as const, toolCallId: `${prefix}-${i}`, toolName: name, output: { type: isError ? ('error-text' as const) : ('text' as const), value } }, options)],
      })),
    ])

const conversation: fc.Arbitrary<ModelMessage[]> = fc
  .array(fc.oneof(userMessage.map((m) => [m]), systemMessage.map((m) => [m]), fc.nat().chain((n) => assistantTurn(`c${n}`))), { maxLength: 8 })
  .map((groups) => {
    // call ids unique over the conversation
    let k = 0
    return groups.flatMap((g) => {
      k++
      return g.map((m) =>
        m.role === 'assistant' && Array.isArray(m.content)
          ? { ...m, content: m.content.map((p) => (p.type === 'tool-call' ? { ...p, toolCallId: `${k}:${p.toolCallId}` } : p)) }
          : m.role === 'tool'
            ? { ...m, content: m.content.map((p) => (p.type === 'tool-result' ? { ...p, toolCallId: `${k}:${p.toolCallId}` } : p)) }
            : m,
      ) as ModelMessage[]
    })
  })

describe('round trips (property-based)', () => {
  it('messages → events → messages gives the messages back', () => {
    fc.assert(
      fc.property(conversation, (messages) => {
        expect(toAiSdkMessages(asEvents(messages))).toEqual(asJson(messages))
      }),
      { numRuns: 300 },
    )
  })

  it('messages → events → a backend → messages gives the messages back (what is written is plain JSON)', async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(conversation.filter((m) => m.length > 0), async (messages) => {
        const persistence = createMemoryPersistence()
        const id = `rt-${n++}`
        await persistence.create({ id, createdAt: 0, delegationDepth: 0 })
        await persistence.append(id, asEvents(messages))
        await persistence.close(id)
        expect(toAiSdkMessages((await persistence.load(id)).events)).toEqual(asJson(messages))
      }),
      { numRuns: 150 },
    )
  })

  it('events → messages → events → messages is stable', () => {
    fc.assert(
      fc.property(randomLog, (events) => {
        const once = toAiSdkMessages(events)
        expect(toAiSdkMessages(asEvents(once))).toEqual(once)
      }),
      { numRuns: 300 },
    )
  })

  it('any log gives a history the AI SDK accepts: every call answered once, no result without its call', async () => {
    await fc.assert(
      fc.asyncProperty(randomLog, async (events) => {
        const messages = toAiSdkMessages(events)
        const open = new Set<string>()
        for (const m of messages) {
          if (m.role === 'tool') {
            for (const p of m.content) {
              if (p.type !== 'tool-result') continue
              expect(open.has(p.toolCallId)).toBe(true)
              open.delete(p.toolCallId)
            }
            continue
          }
          expect([...open]).toEqual([])
          if (m.role === 'assistant' && Array.isArray(m.content)) {
            for (const p of m.content) {
              if (p.type !== 'tool-call' || p.providerExecuted) continue
              // An id comes back only once its earlier call is answered (providers reuse ids).
              expect(open.has(p.toolCallId)).toBe(false)
              open.add(p.toolCallId)
            }
          }
        }
        expect([...open]).toEqual([])
        const { model, prompts } = scriptedModel([{ text: 'ok' }])
        await generateText({ model, allowSystemInMessages: true, messages: [...messages, { role: 'user', content: 'go on' }] })
        expect(prompts).toHaveLength(1)
      }),
      { numRuns: 150 },
    )
  })
})

/** Logs of vocabulary events in any order: calls with and without results, duplicates, rewinds. */
const randomLog: fc.Arbitrary<SessionEvent[]> = fc
  .array(
    fc.oneof(
      text.map((t): [string, JsonValue] => ['user/message', { content: t }]),
      fc.subarray<JsonValue>([{ type: 'text', text: 'hi' }, { type: 'weird', x: 1 }, { type: 'image', image: 'AAAA' }, { type: 'tool-call', callId: 'a', name: 'x', arguments: {} }, { type: 'text', text: 3 }]).map(
        (content): [string, JsonValue] => ['user/message', { content }],
      ),
      text.map((t): [string, JsonValue] => ['system/message', { content: t }]),
      fc.constant<[string, JsonValue]>(['system/message', { content: [{ type: 'text', text: 'a' }, { type: 'image' }] }]),
      fc.tuple(text, fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 2 })).map(([t, ids]): [string, JsonValue] => [
        'assistant/message',
        { turn: 1, step: 0, content: [{ type: 'text', text: t }, { type: 'reasoning', text: 0 }, { type: 'mystery' }, ...ids.map((id) => ({ type: 'tool-call', callId: id, name: 'x', arguments: { id } }))] },
      ]),
      fc.constantFrom('a', 'b', 'c', 'd').map((id): [string, JsonValue] => ['tool/call', { turn: 1, step: 0, callId: id, name: 'y', arguments: '{"v":1}' }]),
      fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.boolean()).map(([id, isError]): [string, JsonValue] => [
        'tool/result',
        { turn: 1, step: 0, callId: id, content: [{ type: 'text', text: 'r' }], ...(isError ? { isError } : {}) },
      ]),
      fc.nat({ max: 12 }).map((to): [string, JsonValue] => ['history/rewind', { to }]),
      fc.constant<[string, JsonValue]>(['turn/start', { turn: 1 }]),
      fc.constant<[string, JsonValue]>(['turn/end', { turn: 1, reason: { kind: 'completed' } }]),
    ),
    { maxLength: 14 },
  )
  .map((items) => items.map(([type, data], i) => ev(i, type, data)))
