// The AI SDK adapter and `history/compact`: toAiSdkMessages shows the summary first and only what
// the compaction keeps, the same on a tail as on the whole log, always balanced; the session
// resumes from the last compaction (seqs and turn numbers continue), records compactions with
// compact(), and a real generateText runs on what it gives.
import { generateText, jsonSchema, type ModelMessage, stepCountIs, tool } from 'ai'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession, toAiSdkMessages } from '../src/adapters/ai-sdk/index.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { toModelHistory, UNANSWERED_TOOL_TEXT } from '../src/session/history.js'
import type { JsonValue, SessionEvent } from '../src/session/schema.js'
import { tailStartOf } from '../src/session/tail-start.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'
import { expectBalanced } from './helpers/ai-sdk-balanced.js'
import { codeOf } from './helpers/codes.js'
import { adapterBackends, recordedPersistence } from './helpers/recorded-persistence.js'


// ---------------------------------------------------------------------------------------------
// Random logs as the recorder and other hosts write them: turns whose calls are recorded as
// `tool/call` before the step's assistant message (or only as `tool/call`: a crash), some calls
// unanswered, compactions (string or block summaries, firstKeptSeq anywhere before them, some
// inside a turn), rewinds (which may undo a compaction), request headers, an open final turn.

type Step =
  | { kind: 'turn'; calls: number; answered: boolean[]; recorder: boolean; crash: boolean }
  | { kind: 'compact'; keepBack: number; insideTurn: boolean; blocks: boolean }
  | { kind: 'rewind'; back: number }
  | { kind: 'header' }

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('turn' as const),
      calls: fc.nat(3),
      answered: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
      recorder: fc.boolean(),
      crash: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('compact' as const), keepBack: fc.nat(14), insideTurn: fc.boolean(), blocks: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rewind' as const), back: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('header' as const) }) },
)

function buildLog(steps: readonly Step[], openTurn: boolean): SessionEvent[] {
  const events: SessionEvent[] = []
  const push = (type: string, data: JsonValue) => events.push({ seq: events.length, type, time: 1000 + events.length, data })
  let turn = 0
  const summary = (blocks: boolean): JsonValue =>
    blocks
      ? [{ type: 'text', text: `summary ${events.length}` }, { type: 'reasoning', text: 'hidden' }, { type: 'image', image: 'AAAA', mediaType: 'image/png' }]
      : `summary ${events.length}`
  for (const step of steps) {
    switch (step.kind) {
      case 'header':
        push('request/header', { header: { model: 'm', at: events.length }, reason: 'change' })
        break
      case 'rewind':
        push('history/rewind', { to: Math.max(0, events.length - step.back) })
        break
      case 'compact':
        if (step.insideTurn) {
          turn++
          push('turn/start', { turn })
          push('history/compact', { summary: summary(step.blocks), firstKeptSeq: Math.max(0, events.length - step.keepBack) })
          push('user/message', { content: `after compaction ${turn}` })
          push('turn/end', { turn, reason: { kind: 'completed' } })
        } else {
          push('history/compact', { summary: summary(step.blocks), firstKeptSeq: Math.max(0, events.length - step.keepBack) })
        }
        break
      case 'turn': {
        turn++
        push('turn/start', { turn })
        push('user/message', { content: `question ${turn}` })
        push('step/start', { turn, step: 0 })
        const ids = Array.from({ length: step.calls }, (_, i) => `t${turn}c${i}`)
        const blocks = ids.map((callId) => ({ type: 'tool-call', callId, name: 'add', arguments: { a: turn, b: 1 } }))
        if (step.recorder || step.crash) for (const callId of ids) push('tool/call', { turn, step: 0, callId, name: 'add', arguments: { a: turn, b: 1 } })
        if (step.crash && ids.length > 0) {
          // Killed in the tool: only the calls are on record; repair answered them (or not).
          ids.forEach((callId, i) => {
            if (step.answered[i]) push('tool/result', { turn, step: 0, callId, content: [{ type: 'text', text: 'Tool call interrupted by a crash; no result was recorded.' }], isError: true })
          })
          push('turn/end', { turn, reason: { kind: 'interrupted' } })
          break
        }
        push('assistant/message', { turn, step: 0, content: [{ type: 'text', text: `answer ${turn}` }, ...blocks] })
        ids.forEach((callId, i) => {
          if (step.answered[i]) push('tool/result', { turn, step: 0, callId, name: 'add', content: [{ type: 'text', text: `r ${callId}` }] })
        })
        push('step/end', { turn, step: 0 })
        push('turn/end', { turn, reason: { kind: 'completed' } })
        break
      }
    }
  }
  if (openTurn) {
    turn++
    push('turn/start', { turn })
    push('user/message', { content: 'still running' })
    push('step/start', { turn, step: 0 })
    push('tool/call', { turn, step: 0, callId: `open${turn}`, name: 'add', arguments: {} })
  }
  return events
}

const logArb = fc.tuple(fc.array(stepArb, { maxLength: 14 }), fc.boolean()).map(([steps, open]) => buildLog(steps, open))

/** The user message a summary becomes. */
function summaryMessage(summary: JsonValue): ModelMessage {
  if (typeof summary === 'string') return { role: 'user', content: summary }
  return {
    role: 'user',
    content: (summary as { type: string }[]).filter((b) => b.type === 'text' || b.type === 'image') as never,
  }
}

describe('toAiSdkMessages with history/compact (property-based)', () => {
  it('the tail from the last compaction gives the messages of the whole log, balanced, as toModelHistory shapes them', () => {
    fc.assert(
      fc.property(logArb, (events) => {
        const full = toAiSdkMessages(events)
        const tail = events.slice(tailStartOf(events))
        expect(toAiSdkMessages(tail)).toEqual(full)
        expectBalanced(full)
        // The same compaction as the provider-neutral history: its summary first, or none.
        const neutral = toModelHistory(events).messages
        if (!events.some((e) => e.type === 'history/rewind')) {
          // Message for message the same view: the same roles, the same results for the same calls.
          // (With rewinds the two differ on one pre-existing point, compaction or not: a
          // `tool/call` whose assistant message a rewind removed is shown here, not there.)
          expect(full.map((m) => m.role)).toEqual(neutral.map((m) => m.role))
          const resultIds = (ms: readonly ModelMessage[]) =>
            ms.flatMap((m) => (m.role === 'tool' ? m.content.flatMap((p) => (p.type === 'tool-result' ? [p.toolCallId] : [])) : []))
          expect(resultIds(full)).toEqual(neutral.filter((m) => m.role === 'tool').map((m) => m.callId))
        }
        const first = neutral[0]
        if (first?.compaction) expect(full[0]).toEqual(summaryMessage(first.content))
        else expect(neutral.some((m) => m.compaction)).toBe(false)
      }),
      { numRuns: 500 },
    )
  })

  it('a compaction undone by a rewind shows the history as it was before it', () => {
    const events = buildLog(
      [
        { kind: 'turn', calls: 1, answered: [true, true, true], recorder: true, crash: false },
        { kind: 'compact', keepBack: 0, insideTurn: false, blocks: false },
      ],
      false,
    )
    const compacted = toAiSdkMessages(events)
    expect(compacted).toEqual([{ role: 'user', content: `summary ${events.length - 1}` }])
    // A rewind whose range holds the compaction's seq undoes it.
    const undone = [...events, { seq: events.length, type: 'history/rewind', time: 1, data: { to: events.length - 1 } }]
    expect(toAiSdkMessages(undone)).toEqual(toAiSdkMessages(events.slice(0, -1)))
    expect(toAiSdkMessages(undone)[0]).toEqual({ role: 'user', content: 'question 1' })
    // The tail of such a log is the whole log (no compaction in force).
    expect(tailStartOf(undone)).toBe(0)
  })

  it('a result whose call lies before firstKeptSeq is left out; a call kept gets its result', () => {
    const events = buildLog([{ kind: 'turn', calls: 2, answered: [true, true, true], recorder: false, crash: false }], false)
    const firstResult = events.findIndex((e) => e.type === 'tool/result')
    const cut = [...events, { seq: events.length, type: 'history/compact', time: 1, data: { summary: 'S', firstKeptSeq: firstResult } }]
    expect(toAiSdkMessages(cut)).toEqual([{ role: 'user', content: 'S' }])
    const beforeMessage = events.findIndex((e) => e.type === 'assistant/message')
    const kept = [...events, { seq: events.length, type: 'history/compact', time: 1, data: { summary: 'S', firstKeptSeq: beforeMessage } }]
    const messages = toAiSdkMessages(kept)
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'tool'])
    expectBalanced(messages)
  })

  it('a malformed compaction (bad firstKeptSeq or summary) is ignored, as toModelHistory ignores it', () => {
    const events = buildLog([{ kind: 'turn', calls: 0, answered: [], recorder: false, crash: false }], false)
    const bad: JsonValue[] = [{ summary: 'S', firstKeptSeq: -1 }, { summary: 'S', firstKeptSeq: 99 }, { summary: 'S', firstKeptSeq: 1.5 }, { summary: 3, firstKeptSeq: 0 }, { summary: 'S' }]
    for (const data of bad) {
      const log: SessionEvent[] = [...events, { seq: events.length, type: 'history/compact', time: 1, data }]
      expect(toAiSdkMessages(log)).toEqual(toAiSdkMessages(events))
    }
  })
})

// ---------------------------------------------------------------------------------------------

const backends = adapterBackends('ai-compact')

const maxTurn = (events: readonly SessionEvent[]) =>
  Math.max(0, ...events.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn))

const addTool = () =>
  tool({
    inputSchema: jsonSchema<{ a: number; b: number }>({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }),
    execute: async ({ a, b }) => ({ sum: a + b }),
  })

describe.each(backends)('the AI SDK session over %s', (_name, backend) => {
  it('opened on any log, it reads the tail, shows the whole log\'s messages, and continues its seqs and turns (property)', async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(logArb.filter((events) => events.length > 0), async (events) => {
        const open = await backend()
        const id = `p${n++}`
        const writer = open()
        await writer.create({ id, createdAt: 0, delegationDepth: 0 })
        await writer.append(id, events)
        await writer.close(id)
        const { persistence, seen: { loads } } = recordedPersistence(open())
        const session = await openAiSdkSession({ persistence, sessionId: id, now: () => 5 })
        // What the session holds is the tail: from the load's firstSeq, contiguous.
        expect(session.firstSeq).toBe(loads[0]!.firstSeq)
        session.events.forEach((e, i) => expect(e.seq).toBe(session.firstSeq + i))
        const repaired = (await persistence.read(id)).events
        // The load starts where §15.1 says, found on the log as stored (before its repair).
        expect(session.firstSeq).toBe(tailStartOf(events))
        expect(session.messages).toEqual(toAiSdkMessages(repaired))
        expectBalanced(session.messages)
        // Appends continue at firstSeq + events.length (a wrong seq is E_SEQ_NOT_CONTIGUOUS).
        const next = session.firstSeq + session.events.length
        expect(next).toBe(repaired.length)
        await session.compact({ summary: 'so far', firstKeptSeq: next })
        const turn = session.turn('and now?')
        await turn.end({ kind: 'completed' })
        await session.close()
        const after = (await open().read(id)).events
        expect(after.slice(0, next)).toEqual(repaired)
        expect(after[next]).toMatchObject({ seq: next, type: 'history/compact', data: { summary: 'so far', firstKeptSeq: next } })
        // Turn numbers go on from the log's last one, even when the tail holds none.
        expect(after[next + 1]).toMatchObject({ type: 'turn/start', data: { turn: maxTurn(repaired) + 1 } })
        expect(toAiSdkMessages(after)).toEqual([
          { role: 'user', content: 'so far' },
          { role: 'user', content: 'and now?' },
        ])
      }),
      { numRuns: 60 },
    )
  })

  it('a real generateText on a compacted, resumed session gets the summary first and continues the log', async () => {
    const open = await backend()
    const first = await openAiSdkSession({ persistence: open(), sessionId: 'g', now: () => 7 })
    const t1 = first.turn('Add 1+2.')
    const m1 = scriptedModel([{ calls: [{ id: 'c1', name: 'add', input: { a: 1, b: 2 } }] }, { text: 'It is 3.' }])
    await generateText({ model: m1.model, tools: t1.guardTools({ add: addTool() }), stopWhen: stepCountIs(5), ...t1.settings })
    await t1.done
    const t2 = first.turn('Add 3+4.')
    const m2 = scriptedModel([{ calls: [{ id: 'c2', name: 'add', input: { a: 3, b: 4 } }] }, { text: 'It is 7.' }])
    await generateText({ model: m2.model, tools: t2.guardTools({ add: addTool() }), stopWhen: stepCountIs(5), ...t2.settings })
    await t2.done
    const keepFrom = first.events.filter((e) => e.type === 'turn/start').at(-1)!.seq
    await first.compact({ summary: 'The user asked for 1+2, which is 3.', firstKeptSeq: keepFrom })
    // In memory too, the history no longer needs what came before firstKeptSeq.
    expect(first.firstSeq).toBe(keepFrom)
    expect(first.messages[0]).toEqual({ role: 'user', content: 'The user asked for 1+2, which is 3.' })
    const before = first.messages
    await first.close()

    const { persistence, seen: { loads } } = recordedPersistence(open())
    const resumed = await openAiSdkSession({ persistence, sessionId: 'g', now: () => 8 })
    expect(loads[0]!.firstSeq).toBe(keepFrom)
    expect(resumed.firstSeq).toBe(keepFrom)
    expect(resumed.events[0]).toMatchObject({ seq: keepFrom, type: 'turn/start' })
    expect(resumed.messages).toEqual(before)
    const t3 = resumed.turn('And 5+6?')
    expect(t3.number).toBe(3)
    const m3 = scriptedModel([{ calls: [{ id: 'c3', name: 'add', input: { a: 5, b: 6 } }] }, { text: 'It is 11.' }])
    const result = await generateText({ model: m3.model, tools: t3.guardTools({ add: addTool() }), stopWhen: stepCountIs(5), ...t3.settings })
    await t3.done
    expect(result.text).toBe('It is 11.')
    const prompt = m3.prompts[0]!
    expect(prompt[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'The user asked for 1+2, which is 3.' }] })
    expect(prompt[1]).toEqual({ role: 'user', content: [{ type: 'text', text: 'Add 3+4.' }] })
    expect(JSON.stringify(prompt)).not.toContain('Add 1+2.')
    expect(JSON.stringify(prompt)).not.toContain('"c1"')
    await resumed.close()
    // The whole log: contiguous, nothing before the tail rewritten, turn 3 after turn 2.
    const all = (await open().read('g')).events
    all.forEach((e, i) => expect(e.seq).toBe(i))
    expect(all.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)).toEqual([1, 2, 3])
    expect(toModelHistory(all).messages[0]).toMatchObject({ role: 'user', compaction: true, content: 'The user asked for 1+2, which is 3.' })
  })

  it('generateText accepts the history whatever firstKeptSeq cuts (between a call and its result, inside a step)', async () => {
    const open = await backend()
    const source = await openAiSdkSession({ persistence: open(), sessionId: 'src', now: () => 1 })
    const t = source.turn('Add twice.')
    const model = scriptedModel([
      { text: 'Two sums.', calls: [{ id: 'a1', name: 'add', input: { a: 1, b: 1 } }, { id: 'a2', name: 'add', input: { a: 2, b: 2 } }] },
      { reasoning: 'one more', calls: [{ id: 'a3', name: 'add', input: { a: 3, b: 3 } }] },
      { text: 'Done.' },
    ])
    await generateText({ model: model.model, tools: t.guardTools({ add: addTool() }), stopWhen: stepCountIs(5), ...t.settings })
    await t.done
    const events = [...source.events]
    await source.close()
    for (let k = 0; k <= events.length; k++) {
      const id = `cut${k}`
      const w = open()
      await w.create({ id, createdAt: 0, delegationDepth: 0 })
      await w.append(id, events)
      await w.close(id)
      const session = await openAiSdkSession({ persistence: open(), sessionId: id })
      await session.compact({ summary: [{ type: 'text', text: `kept from ${k}` }], firstKeptSeq: k })
      await session.close()
      const resumed = await openAiSdkSession({ persistence: open(), sessionId: id })
      expect(resumed.firstSeq).toBe(k)
      expectBalanced(resumed.messages)
      const turn = resumed.turn('Go on.')
      const next = scriptedModel([{ text: 'ok' }])
      await expect(generateText({ model: next.model, ...turn.settings })).resolves.toMatchObject({ text: 'ok' })
      await turn.done
      expect(next.prompts[0]![0]).toEqual({ role: 'user', content: [{ type: 'text', text: `kept from ${k}` }] })
      await resumed.close()
    }
  })

  it('compact() keeping messages from before the tail reads them back, and the history is the whole log\'s', async () => {
    const open = await backend()
    const s = await openAiSdkSession({ persistence: open(), sessionId: 'rb' })
    for (const q of ['one', 'two', 'three']) await s.turn(q).end({ kind: 'completed' })
    const turnStarts = s.events.filter((e) => e.type === 'turn/start').map((e) => e.seq)
    await s.compact({ summary: 'first summary', firstKeptSeq: turnStarts[2]! })
    await s.close()
    const resumed = await openAiSdkSession({ persistence: open(), sessionId: 'rb' })
    expect(resumed.firstSeq).toBe(turnStarts[2])
    // A new compaction that keeps turn two again: events before the tail are needed.
    await resumed.compact({ summary: 'second summary', firstKeptSeq: turnStarts[1]! })
    expect(resumed.firstSeq).toBe(turnStarts[1])
    resumed.events.forEach((e, i) => expect(e.seq).toBe(resumed.firstSeq + i))
    const full = (await open().read('rb')).events
    expect(resumed.messages).toEqual(toAiSdkMessages(full))
    expect(resumed.messages).toEqual([
      { role: 'user', content: 'second summary' },
      { role: 'user', content: 'two' },
      { role: 'user', content: 'three' },
    ])
    await resumed.close()
  })

  it('a compaction that keeps nothing: the resume reads one event, the next turn number continues, block summaries become parts', async () => {
    const open = await backend()
    const s = await openAiSdkSession({ persistence: open(), sessionId: 'none' })
    for (const q of ['a', 'b']) await s.turn(q).end({ kind: 'completed' })
    const summary = [
      { type: 'text', text: 'Summary.' },
      { type: 'image', image: 'iVBORw0KGgo=', mediaType: 'image/png' },
      { type: 'reasoning', text: 'not a user part' },
    ]
    await s.compact({ summary })
    expect(s.events).toHaveLength(1)
    await s.close()
    const { persistence, seen: { loads } } = recordedPersistence(open())
    const resumed = await openAiSdkSession({ persistence, sessionId: 'none' })
    expect(loads[0]!.length).toBe(1)
    expect(resumed.messages).toEqual([{ role: 'user', content: [summary[0], summary[1]] }])
    const turn = resumed.turn('c')
    expect(turn.number).toBe(3)
    const model = scriptedModel([{ text: 'seen' }])
    await generateText({ model: model.model, ...turn.settings })
    await turn.done
    expect(model.prompts[0]![0]).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'Summary.' }, { type: 'file', mediaType: 'image/png' }] })
    await resumed.close()
  })

  it('refuses bad compactions with E_INVALID_EVENT / E_NOT_JSON and writes nothing; compact and turn exclude each other', async () => {
    const open = await backend()
    const s = await openAiSdkSession({ persistence: open(), sessionId: 'bad' })
    await s.turn('q').end({ kind: 'completed' })
    const length = s.events.length
    const bad: unknown[] = [
      undefined,
      {},
      { summary: 42 },
      { summary: null },
      { summary: [{ text: 'no type' }] },
      { summary: ['text'] },
      { summary: 'S', firstKeptSeq: -1 },
      { summary: 'S', firstKeptSeq: 1.5 },
      { summary: 'S', firstKeptSeq: '0' },
      { summary: 'S', firstKeptSeq: length + 1 },
      { summary: 'S', firstKeptSeq: Number.NaN },
      { summary: 'S', keep: 3 },
    ]
    for (const c of bad) expect(await codeOf(s.compact(c as never)), JSON.stringify(c)).toBe('E_INVALID_EVENT')
    expect(await codeOf(s.compact({ summary: [{ type: 'text', text: 'x', n: 10n as never }] }))).toBe('E_NOT_JSON')
    expect(await codeOf(s.compact({ summary: [{ type: 'text', text: 'x', when: new Date() as never }] }))).toBe('E_NOT_JSON')
    expect(s.events).toHaveLength(length)
    // The firstKeptSeq bound is the compaction's own seq: that one is accepted.
    await s.compact({ summary: 'ok', firstKeptSeq: length })
    // Not while a turn is being recorded…
    const turn = s.turn('q2')
    expect(await codeOf(s.compact({ summary: 'mid-turn' }))).toBe('E_SESSION_LIVE')
    await turn.end({ kind: 'completed' })
    // …and no turn while a compaction is being recorded.
    const pending = s.compact({ summary: 'pending' })
    expect(await codeOf(() => s.turn('too early'))).toBe('E_SESSION_LIVE')
    await pending
    await s.close()
    expect(await codeOf(s.compact({ summary: 'closed' }))).toBe('E_DISPOSED')
    const all = (await open().read('bad')).events
    expect(all.filter((e) => e.type === 'history/compact').map((e) => (e.data as { summary: string }).summary)).toEqual(['ok', 'pending'])
    expect(toAiSdkMessages(all)).toEqual([{ role: 'user', content: 'pending' }])
  })

  it('a summary too long for a line is refused before anything is queued: the session goes on', async () => {
    const open = await backend()
    const s = await openAiSdkSession({ persistence: open(), sessionId: 'long-summary' })
    await s.turn('q').end({ kind: 'completed' })
    const length = s.events.length
    const err = await s.compact({ summary: 'x'.repeat(64 * 1024 * 1024) }).then(
      () => undefined,
      (e: { code: string; message: string }) => e,
    )
    expect(err?.code).toBe('E_INVALID_EVENT')
    expect(err?.message).toMatch(/serializes to \d+ bytes/)
    expect(s.events).toHaveLength(length)
    // The session is not broken: the next compaction and turn are recorded at the next seqs.
    await s.compact({ summary: 'short', firstKeptSeq: length })
    await s.turn('q2').end({ kind: 'completed' })
    await s.close()
    const all = (await open().read('long-summary')).events
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i))
    expect(all.filter((e) => e.type === 'history/compact').map((e) => (e.data as { summary: string }).summary)).toEqual(['short'])
    expect(all.at(-1)?.type).toBe('turn/end')
  })

  it('a summary the caller changes after compact() does not change what was recorded', async () => {
    const open = await backend()
    const s = await openAiSdkSession({ persistence: open(), sessionId: 'mut' })
    const summary = [{ type: 'text', text: 'original' }]
    const done = s.compact({ summary })
    summary[0]!.text = 'changed'
    await done
    expect(s.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'original' }] }])
    await s.close()
    expect(toAiSdkMessages((await open().read('mut')).events)).toEqual([{ role: 'user', content: [{ type: 'text', text: 'original' }] }])
  })
})

it('a crash after a compaction: the resumed session answers the interrupted call, after the summary', async () => {
  const persistence = createMemoryPersistence({ name: `crash-${Math.random()}` })
  const s = await openAiSdkSession({ persistence, sessionId: 'c' })
  await s.turn('old').end({ kind: 'completed' })
  await s.compact({ summary: 'old things' })
  // A run killed inside its tool: its turn/start, input and call are all that is on record.
  const t = s.turn('new')
  const hang = new Promise<never>(() => undefined)
  const model = scriptedModel([{ calls: [{ id: 'k1', name: 'slow', input: {} }] }])
  const slow = tool({ inputSchema: jsonSchema<{ n?: number }>({ type: 'object' }), execute: (): Promise<string> => hang })
  void generateText({ model: model.model, tools: t.guardTools({ slow }), ...t.settings }).catch(() => undefined)
  await expect.poll(() => persistence.read('c').then((r) => r.events.some((e) => e.type === 'tool/call'))).toBe(true)
  // The process "dies": the next instance sees the open turn (same name, so the same store).
  const other = createMemoryPersistence({ name: `crash-other-${Math.random()}` })
  const raw = (await persistence.read('c')).events
  await other.create({ id: 'c', createdAt: 0, delegationDepth: 0 })
  await other.append('c', raw)
  await other.close('c')
  const resumed = await openAiSdkSession({ persistence: other, sessionId: 'c' })
  expect(resumed.repair?.closers.length).toBeGreaterThan(0)
  expect(resumed.messages).toEqual([
    { role: 'user', content: 'old things' },
    { role: 'user', content: 'new' },
    { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'k1', toolName: 'slow', input: {} }] },
    {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'k1', toolName: 'slow', output: { type: 'error-text', value: 'Tool call interrupted by a crash; no result was recorded.' } }],
    },
  ])
  expect(resumed.messages).not.toContainEqual(expect.objectContaining({ content: UNANSWERED_TOOL_TEXT }))
  const turn = resumed.turn('did it run?')
  expect(turn.number).toBe(3)
  const next = scriptedModel([{ text: 'unknown' }])
  await generateText({ model: next.model, ...turn.settings })
  await turn.done
  await resumed.close()
})
