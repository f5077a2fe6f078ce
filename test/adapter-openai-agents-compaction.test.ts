// JsonlSession and `history/compact`: getItems starts with the summary item and holds only what
// the compaction keeps (a result whose call went with the summary is left out), the same on the
// tail a resume reads as on the whole log; pop and clear keep their MemorySession meaning across
// compactions (a pop that would undo one records it again); compact() refuses bad input; a real
// run (the SDK's ScriptedModel) receives the summary item first.
import type { AgentInputItem, FunctionCallItem } from '@openai/agents'
import { Agent, run, tool } from '@openai/agents'
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents-core/testing'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import {
  decodeItems,
  ITEM_EVENT,
  ITEM_FIELD,
  JsonlSession,
  PROVISIONAL_FIELD,
  summaryItem,
  trackToolCalls,
} from '../src/adapters/openai-agents/index.js'
import { RECORDER } from '../src/adapters/openai-agents/jsonl-session.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import { toModelHistory } from '../src/session/history.js'
import type { JsonValue, SessionEvent } from '../src/session/schema.js'
import { tailStartOf } from '../src/session/tail-start.js'
import { agentItem } from './fixtures/openai-agents-items.js'
import { codeOf } from './helpers/codes.js'
import { adapterBackends, recordedPersistence } from './helpers/recorded-persistence.js'
import { tmpRoot } from './helpers/tmp-root.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'


const backends = adapterBackends('oa-compact')

const user = (content: string): AgentInputItem => ({ type: 'message', role: 'user', content })
const call = (callId: string, name = 'add'): AgentInputItem => ({ type: 'function_call', name, callId, status: 'completed', arguments: '{}' })
const result = (callId: string, text = 'ok', name = 'add'): AgentInputItem => ({
  type: 'function_call_result',
  name,
  callId,
  status: 'completed',
  output: { type: 'text', text },
})
const summary = (text: string) => summaryItem(text)

// ---------------------------------------------------------------------------------------------
// The model: what the SDK's MemorySession would show, with compaction as documented.

interface Model {
  /** The items since the summary (or all of them), before results without their call are left out. */
  rest: AgentInputItem[]
  summary: AgentInputItem | undefined
}

const isCall = (i: AgentInputItem) => i.type === 'function_call'
const isResult = (i: AgentInputItem) => i.type === 'function_call_result'
const callIdOf = (i: AgentInputItem) => (i as { callId?: string }).callId

/** Indices of `rest` the session shows: with a compaction, a result whose call is not before it is left out. */
function shownIndices(m: Model): number[] {
  if (!m.summary) return m.rest.map((_, i) => i)
  const calls = new Set<string>()
  const out: number[] = []
  m.rest.forEach((item, i) => {
    if (isCall(item)) calls.add(callIdOf(item)!)
    if (isResult(item) && !calls.has(callIdOf(item)!)) return
    out.push(i)
  })
  return out
}
const shown = (m: Model): AgentInputItem[] => [...(m.summary ? [m.summary] : []), ...shownIndices(m).map((i) => m.rest[i]!)]

type Op =
  | { kind: 'add'; items: AgentInputItem[] }
  | { kind: 'tracked'; items: AgentInputItem[] }
  | { kind: 'pop' }
  | { kind: 'clear' }
  | { kind: 'compact'; text: string; keep: number }
  | { kind: 'reopen' }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.array(agentItem(), { minLength: 1, maxLength: 4 }).map((items): Op => ({ kind: 'add', items })) },
  { weight: 2, arbitrary: fc.array(agentItem(), { minLength: 1, maxLength: 4 }).map((items): Op => ({ kind: 'tracked', items })) },
  { weight: 2, arbitrary: fc.constant<Op>({ kind: 'pop' }) },
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'clear' }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('compact' as const), text: fc.string({ maxLength: 8 }), keep: fc.nat(6) }) },
  { weight: 2, arbitrary: fc.constant<Op>({ kind: 'reopen' }) },
)

describe.each(backends)('JsonlSession with compactions over %s', (_name, backend) => {
  it('behaves as the model through adds, tracked runs, pops, clears, compactions and reopens; the tail shows what the whole log shows', async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 14 }), async (ops) => {
        const open = await backend()
        const id = `m${n++}`
        let watched = recordedPersistence(open())
        let session = new JsonlSession({ persistence: watched.persistence, sessionId: id })
        const m: Model = { rest: [], summary: undefined }
        let written = false
        for (const o of ops) {
          switch (o.kind) {
            case 'add':
              await session.addItems(o.items)
              m.rest.push(...o.items)
              written = true
              break
            case 'tracked': {
              // As trackToolCalls does: each call durable before its tool runs, then its result.
              const recorder = session[RECORDER]
              for (const item of o.items) {
                if (item.type !== 'function_call') continue
                await recorder.recordCall({ ...item, id: item.callId } as FunctionCallItem)
                await recorder.recordResult(item as FunctionCallItem, 'ok')
                recorder.settled()
              }
              await session.addItems(o.items)
              m.rest.push(...o.items)
              written = true
              break
            }
            case 'pop': {
              const idx = shownIndices(m)
              let expected: AgentInputItem | undefined
              if (idx.length > 0) {
                const j = idx.at(-1)!
                expected = m.rest[j]
                m.rest = m.rest.slice(0, j)
              } else if (m.summary) {
                expected = m.summary
                m.summary = undefined
                m.rest = []
              }
              expect(await session.popItem()).toEqual(expected)
              break
            }
            case 'clear':
              await session.clearSession()
              m.rest = []
              m.summary = undefined
              break
            case 'compact': {
              await session.compact({ summary: o.text, keepItems: o.keep })
              const idx = shownIndices(m)
              m.rest = o.keep === 0 || idx.length === 0 ? [] : m.rest.slice(idx[Math.max(0, idx.length - o.keep)])
              m.summary = summary(o.text)
              written = true
              break
            }
            case 'reopen':
              await session.close()
              watched = recordedPersistence(open())
              session = new JsonlSession({ persistence: watched.persistence, sessionId: id })
              break
          }
          const items = await session.getItems()
          expect(items).toEqual(shown(m))
          if (m.summary) {
            // Balanced: no result without its call before it.
            const calls = new Set<string>()
            for (const item of items) {
              if (isCall(item)) calls.add(callIdOf(item)!)
              if (isResult(item)) expect(calls.has(callIdOf(item)!)).toBe(true)
            }
          }
          if (!written) continue
          const all = (await open().read(id)).events
          // The whole log and the tail a resume reads give the same items.
          expect(decodeItems(all)).toEqual(items)
          expect(decodeItems(all.slice(tailStartOf(all)))).toEqual(items)
          if (o.kind === 'reopen') {
            // The resume read the tail (§15.1), nothing before it.
            expect(watched.seen.loads.at(-1)?.firstSeq).toBe(tailStartOf(all))
          }
        }
        await session.close()
      }),
      { numRuns: 60 },
    )
  })

  it('pops across a compaction as MemorySession would, and a pop of a kept item records the compaction again', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'pop' })
    await session.addItems([user('a'), user('b')])
    await session.addItems([user('c')])
    await session.compact({ summary: 'S', keepItems: 2 })
    expect(await session.getItems()).toEqual([summary('S'), user('b'), user('c')])
    expect(await session.popItem()).toEqual(user('c'))
    expect(await session.popItem()).toEqual(user('b'))
    expect(await session.getItems()).toEqual([summary('S')])
    await session.close()
    const all = (await open().read('pop')).events
    // c and b lie before the compaction: each one's rewind undoes it, so it is recorded again,
    // in the same append (rewind, then the same compaction).
    const compactions = all.filter((e) => e.type === 'history/compact')
    expect(compactions).toHaveLength(3)
    for (const c of compactions) expect(c.data).toEqual({ summary: 'S', firstKeptSeq: 2 })
    expect(all.slice(-4).map((e) => e.type)).toEqual(['history/rewind', 'history/compact', 'history/rewind', 'history/compact'])
    expect(toModelHistory(all).messages).toEqual([{ role: 'user', seq: compactions[2]!.seq, compaction: true, content: 'S' }])

    const again = new JsonlSession({ persistence: open(), sessionId: 'pop' })
    expect(await again.getItems()).toEqual([summary('S')])
    // Popping the summary, the only item left, empties the history; the compaction is undone.
    expect(await again.popItem()).toEqual(summary('S'))
    expect(await again.getItems()).toEqual([])
    expect(await again.popItem()).toBeUndefined()
    await again.addItems([user('d')])
    expect(await again.getItems()).toEqual([user('d')])
    await again.close()
    const third = new JsonlSession({ persistence: open(), sessionId: 'pop' })
    expect(await third.getItems()).toEqual([user('d')])
    await third.close()
  })

  it('keeps a call with its result; a result whose call went with the summary is left out, now and later', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'calls' })
    await session.addItems([user('q'), call('c1'), result('c1'), call('c2'), result('c2')])
    await session.compact({ summary: 'S', keepItems: 3 })
    // Kept: result c1 (its call is not kept: left out), call c2, result c2.
    expect(await session.getItems()).toEqual([summary('S'), call('c2'), result('c2')])
    // A result for c1 added later still has no call in the history.
    await session.addItems([result('c1', 'late'), call('c3'), result('c3')])
    expect(await session.getItems()).toEqual([summary('S'), call('c2'), result('c2'), call('c3'), result('c3')])
    expect(await session.getItems(2)).toEqual([call('c3'), result('c3')])
    expect(await session.getItems(10)).toEqual([summary('S'), call('c2'), result('c2'), call('c3'), result('c3')])
    expect(await session.getItems(0)).toEqual([])
    await session.close()
  })

  it('resumes from the tail: one short load, later reads from there too, and turn numbers continue', async () => {
    const open = await backend()
    const first = new JsonlSession({ persistence: open(), sessionId: 'tail' })
    for (let i = 0; i < 30; i++) await first.addItems([user(`q${i}`), { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `a${i}` }] }])
    await first.compact({ summary: 'thirty exchanges' })
    await first.close()
    const at = (await open().read('tail')).length - 1 // the compaction's seq, where the tail starts
    expect(at).toBeGreaterThan(100)
    const { persistence, seen } = recordedPersistence(open())
    const resumed = new JsonlSession({ persistence, sessionId: 'tail' })
    expect(await resumed.getItems()).toEqual([summary('thirty exchanges')])
    expect(seen.loads).toEqual([{ firstSeq: at, length: 1 }])
    await resumed.addItems([user('next')])
    expect(await resumed.getItems()).toEqual([summary('thirty exchanges'), user('next')])
    // Later reads start at the tail too; the whole log is never read, nor anything before the
    // tail: the compaction records the last turn number (the tail holds no turn).
    expect(seen.inspects).toBe(0)
    expect(seen.reads.some((r) => r.fromSeq === at)).toBe(true)
    expect(seen.reads.filter((r) => (r.fromSeq ?? 0) < at).map((r) => r.fromSeq)).toEqual([])
    await resumed.close()
    const all = (await open().read('tail')).events
    all.forEach((e, i) => expect(e.seq).toBe(i))
    const turns = all.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)
    expect(turns).toEqual(Array.from({ length: 31 }, (_, i) => i + 1))
  })

  it('a crash in a tracked run after a compaction: the resume answers the call after the summary', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'crash' })
    await session.addItems([user('old'), call('c0'), result('c0')])
    await session.compact({ summary: 'S' })
    const recorder = session[RECORDER]
    recorder.stageInput([summary('S'), user('run it')])
    await recorder.recordCall({ type: 'function_call', name: 'slow', callId: 'k1', status: 'completed', arguments: '{}', id: 'fc_1' } as FunctionCallItem)
    // compact() waits for a tracked run's items: refused while its calls are recorded ahead.
    expect(await codeOf(session.compact({ summary: 'mid-run' }))).toBe('E_SESSION_LIVE')
    // The process dies here: copy what is on record into a store nobody holds.
    const raw = (await open().read('crash')).events
    const other = createMemoryPersistence({ name: `oa-crash-${Math.random()}` })
    await other.create({ id: 'crash', createdAt: 0, delegationDepth: 0 })
    await other.append('crash', raw)
    await other.close('crash')
    const resumed = new JsonlSession({ persistence: other, sessionId: 'crash' })
    expect(await resumed.getItems()).toEqual([
      summary('S'),
      user('run it'),
      { type: 'function_call', name: 'slow', callId: 'k1', status: 'completed', arguments: '{}' },
      { type: 'function_call_result', name: 'slow', callId: 'k1', status: 'incomplete', output: { type: 'text', text: INTERRUPTED_TOOL_TEXT } },
    ])
    await resumed.close()
  })
})

describe('decoding a compaction inside a tracked turn', () => {
  it('a turn read from its middle (firstKeptSeq after its turn/start) still replaces its provisional items', () => {
    const u = user('go')
    const c = call('p1')
    const r = result('p1')
    let seq = 0
    const ev = (type: string, data: JsonValue, extra: Record<string, JsonValue> = {}): SessionEvent => ({ seq: seq++, type, time: 1, data, ...extra })
    const events = [
      ev('turn/start', { turn: 1 }),
      ev('user/message', { content: 'go' }, { [ITEM_FIELD]: u as never, [PROVISIONAL_FIELD]: true }),
      ev('assistant/message', { turn: 1, step: 1, content: [{ type: 'tool-call', callId: 'p1', name: 'add', arguments: {} }] }, { [ITEM_FIELD]: c as never, [PROVISIONAL_FIELD]: true }),
      ev('history/compact', { summary: 'S', firstKeptSeq: 2 }),
      ev('tool/result', { turn: 1, step: 1, callId: 'p1', content: [{ type: 'text', text: 'ok' }] }, { [ITEM_FIELD]: r as never, [PROVISIONAL_FIELD]: true }),
      ev(ITEM_EVENT, { itemType: 'message' }, { ignorable: true as never, [ITEM_FIELD]: u as never }),
      ev(ITEM_EVENT, { itemType: 'function_call' }, { ignorable: true as never, [ITEM_FIELD]: c as never }),
      ev(ITEM_EVENT, { itemType: 'function_call_result' }, { ignorable: true as never, [ITEM_FIELD]: r as never }),
      ev('turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ]
    expect(decodeItems(events)).toEqual([summary('S'), u, c, r])
    expect(tailStartOf(events)).toBe(2)
    expect(decodeItems(events.slice(2))).toEqual([summary('S'), u, c, r])
  })

  it('the summary item: a string as one input_text part; of blocks, text and input_* parts only', () => {
    expect(summaryItem('S')).toEqual({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'S' }] })
    expect(
      summaryItem([
        { type: 'text', text: 'a' },
        { type: 'reasoning', text: 'hidden' },
        { type: 'input_image', image: 'https://example.com/x.png', detail: 'auto' },
        { type: 'tool-call', callId: 'x', name: 'y', arguments: {} },
        { type: 'text', text: 'b' },
      ]),
    ).toEqual({
      type: 'message',
      role: 'user',
      content: [
        { type: 'input_text', text: 'a' },
        { type: 'input_image', image: 'https://example.com/x.png', detail: 'auto' },
        { type: 'input_text', text: 'b' },
      ],
    })
    expect(summaryItem([])).toEqual({ type: 'message', role: 'user', content: [{ type: 'input_text', text: '' }] })
  })
})

describe('compact() refuses bad input', () => {
  it('E_INVALID_EVENT / E_NOT_JSON, nothing written, the session still usable', async () => {
    const persistence = createMemoryPersistence()
    const session = new JsonlSession({ persistence, sessionId: 'bad' })
    await session.addItems([user('a')])
    const before = (await persistence.read('bad')).events.length
    const bad: unknown[] = [
      undefined,
      null,
      'summary',
      {},
      { summary: 7 },
      { summary: [{ text: 'no type' }] },
      { summary: [3] },
      { summary: 'S', keepItems: -1 },
      { summary: 'S', keepItems: 1.5 },
      { summary: 'S', keepItems: '2' },
      { summary: 'S', keepItems: Number.POSITIVE_INFINITY },
      { summary: 'S', firstKeptSeq: 0 },
    ]
    for (const options of bad) expect(await codeOf(session.compact(options as never)), String(JSON.stringify(options))).toBe('E_INVALID_EVENT')
    expect(await codeOf(session.compact({ summary: [{ type: 'text', text: 'x', n: 1n as never }] }))).toBe('E_NOT_JSON')
    expect(await codeOf(session.compact({ summary: [{ type: 'text', text: 'x', f: (() => 1) as never }] }))).toBe('E_NOT_JSON')
    expect((await persistence.read('bad')).events.length).toBe(before)
    expect(await session.getItems()).toEqual([user('a')])
    // A summary changed after the call does not change what is recorded.
    const blocks = [{ type: 'text', text: 'kept' }]
    const done = session.compact({ summary: blocks, keepItems: 5 })
    blocks[0]!.text = 'changed'
    await done
    expect(await session.getItems()).toEqual([summaryItem([{ type: 'text', text: 'kept' }]), user('a')])
    await session.close()
  })
})

describe('a real Agents SDK run on a compacted, resumed session', () => {
  it('the ScriptedModel receives the summary item first, then the kept items, then the new input', async () => {
    const root = await tmpRoot()
    const add = tool({
      name: 'add',
      description: 'adds',
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => String(a + b),
    })
    const model = new ScriptedModel([
      [functionCall('add', { a: 1, b: 2 }, { callId: 'call_1' })],
      [assistantMessage('It is 3.')],
      [assistantMessage('Noted.')],
    ])
    const agent = new Agent({ name: 'Calc', instructions: 'Add.', model, tools: [add] })
    const first = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 'run' })
    await run(agent, 'Add 1 and 2.', { session: first })
    await run(agent, 'Remember it.', { session: first })
    const before = await first.getItems()
    // Keep the second run (its input and answer); the first goes into the summary.
    await first.compact({ summary: 'The user added 1 and 2; the answer was 3.', keepItems: 2 })
    expect(await first.getItems()).toEqual([summary('The user added 1 and 2; the answer was 3.'), ...before.slice(-2)])
    await first.close()

    const { persistence, seen } = recordedPersistence(createJsonlPersistence({ root }))
    const resumed = new JsonlSession({ persistence, sessionId: 'run' })
    const next = new ScriptedModel([
      [functionCall('add', { a: 3, b: 3 }, { callId: 'call_2' })],
      [assistantMessage('3 doubled is 6.')],
    ])
    const agent2 = new Agent({ name: 'Calc', instructions: 'Add.', model: next, tools: [add] })
    const untrack = trackToolCalls(agent2, resumed)
    const out = await run(agent2, 'Double it.', { session: resumed })
    untrack()
    expect(out.finalOutput).toBe('3 doubled is 6.')
    expect(seen.loads[0]!.firstSeq).toBeGreaterThan(0)
    const input = next.calls[0]!.request.input as AgentInputItem[]
    expect(input[0]).toEqual(summary('The user added 1 and 2; the answer was 3.'))
    expect(input.slice(1, 3)).toEqual(before.slice(-2))
    expect(input[3]).toMatchObject({ role: 'user', content: 'Double it.' })
    expect(JSON.stringify(input)).not.toContain('Add 1 and 2.')
    expect(JSON.stringify(input)).not.toContain('call_1')
    const items = await resumed.getItems()
    expect(items[0]).toEqual(summary('The user added 1 and 2; the answer was 3.'))
    expect(items.filter((i) => i.type === 'function_call').map(callIdOf)).toEqual(['call_2'])
    await resumed.close()
    // The tracked run's input matched the history (the summary included): it was recorded
    // ahead of its call, provisionally, and the run's own addItems placed it once.
    const all = (await createJsonlPersistence({ root }).read('run')).events
    expect(all.some((e) => e.type === 'user/message' && e[PROVISIONAL_FIELD] === true && (e.data as { content: unknown }).content === 'Double it.')).toBe(true)
    expect(all.filter((e) => e.type === 'user/message' && (e.data as { content: unknown }).content === 'Double it.')).toHaveLength(1)
    const turns = all.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)
    expect(turns).toEqual([1, 2, 3])
    expect(toModelHistory(all).messages[0]).toMatchObject({ role: 'user', compaction: true })
  })
})
