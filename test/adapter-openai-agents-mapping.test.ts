// The pure core of the Agents SDK adapter: items -> events -> items, property-based.
import type { AgentInputItem } from '@openai/agents'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  closeTurn,
  decodeItems,
  encodeItems,
  type EventDraft,
  ITEM_EVENT,
  ITEM_FIELD,
  openTurn,
} from '../src/adapters/openai-agents/index.js'
import { computeClosers, INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import { SessionEventSchema, type SessionEvent } from '../src/session/schema.js'
import { toModelHistory } from '../src/session/history.js'
import { agentItem, batches } from './fixtures/openai-agents-items.js'

const stamp = (drafts: EventDraft[], from = 0): SessionEvent[] =>
  drafts.map((d, i) => ({ seq: from + i, type: d.type, time: 1000, ...d }) as SessionEvent)

/** The events of `batches`, one completed turn per batch. */
function encodeTurns(all: AgentInputItem[][]): SessionEvent[] {
  const drafts: EventDraft[] = []
  all.forEach((items, i) => {
    const opened = openTurn(i + 1)
    const { drafts: body, state } = encodeItems(items, opened.state)
    drafts.push(opened.draft, ...body, ...closeTurn(state, 'completed'))
  })
  return stamp(drafts)
}

describe('items <-> events', () => {
  it('round trip: decoding the encoded turns gives the items back, deep-equal and in order', () => {
    fc.assert(
      fc.property(batches(), (all) => {
        expect(decodeItems(encodeTurns(all))).toEqual(all.flat())
      }),
      { numRuns: 300 },
    )
  })

  it('every event passes the envelope schema and survives JSON; turns and steps are balanced', () => {
    fc.assert(
      fc.property(batches(), (all) => {
        const events = encodeTurns(all)
        for (const e of events) expect(SessionEventSchema.safeParse(e).success).toBe(true)
        const reread = events.map((e) => JSON.parse(JSON.stringify(e)) as SessionEvent)
        expect(decodeItems(reread)).toEqual(all.flat())
        expect(computeClosers(events, 0)).toEqual([])
        let open = 0
        for (const e of events) {
          if (e.type === 'step/start') open++
          if (e.type === 'step/end') open--
          expect(open === 0 || open === 1).toBe(true)
        }
        expect(open).toBe(0)
      }),
      { numRuns: 200 },
    )
  })

  it('one vocabulary event per item: messages, calls, results; other types as ignorable events', () => {
    fc.assert(
      fc.property(fc.array(agentItem(), { maxLength: 12 }), (items) => {
        const events = encodeTurns([items])
        const carrying = events.filter((e) => e[ITEM_FIELD] !== undefined)
        expect(carrying).toHaveLength(items.length)
        carrying.forEach((e, i) => {
          const item = items[i] as { type?: string; role?: string }
          const expected =
            item.role === 'user'
              ? 'user/message'
              : item.role === 'system'
                ? 'system/message'
                : item.role === 'assistant' || item.type === 'function_call' || item.type === 'reasoning'
                  ? 'assistant/message'
                  : item.type === 'function_call_result'
                    ? 'tool/result'
                    : ITEM_EVENT
          expect(e.type).toBe(expected)
          if (expected === ITEM_EVENT) expect(e.ignorable).toBe(true)
        })
        // History sees one message per vocabulary item, never an ignorable one, but for a result
        // with no call to answer (§7: it answers the latest call with its id recorded before it,
        // if that call has no result yet; random items give stray and repeated results).
        const open = new Map<string, boolean>() // callId -> answered
        let vocabulary = 0
        for (const e of carrying) {
          const data = e.data as { callId?: unknown; content?: unknown }
          if (e.type === 'assistant/message' && Array.isArray(data.content)) {
            for (const b of data.content as { type?: unknown; callId?: unknown }[]) if (b?.type === 'tool-call' && typeof b.callId === 'string') open.set(b.callId, false)
          }
          if (e.type === 'tool/result') {
            if (typeof data.callId !== 'string' || open.get(data.callId) !== false) continue
            open.set(data.callId, true)
          }
          if (e.type !== ITEM_EVENT) vocabulary++
        }
        expect(toModelHistory(events).messages.filter((m) => m.synthetic !== true)).toHaveLength(vocabulary)
      }),
      { numRuns: 200 },
    )
  })

  it('maps a call and its result to tool-call and tool/result blocks of one step', () => {
    const items: AgentInputItem[] = [
      { type: 'message', role: 'user', content: 'add' },
      { type: 'function_call', name: 'add', callId: 'c1', status: 'completed', arguments: '{"a":1}' },
      { type: 'function_call_result', name: 'add', callId: 'c1', status: 'completed', output: { type: 'text', text: '1' } },
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'one' }] },
    ]
    const events = encodeTurns([items]).map(({ [ITEM_FIELD]: _item, time: _t, ...rest }) => rest)
    expect(events).toEqual([
      { seq: 0, type: 'turn/start', data: { turn: 1 } },
      { seq: 1, type: 'user/message', data: { content: 'add' } },
      { seq: 2, type: 'step/start', data: { turn: 1, step: 1 } },
      { seq: 3, type: 'assistant/message', data: { turn: 1, step: 1, content: [{ type: 'tool-call', callId: 'c1', name: 'add', arguments: { a: 1 } }] } },
      { seq: 4, type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', content: [{ type: 'text', text: '1' }] } },
      { seq: 5, type: 'step/end', data: { turn: 1, step: 1 } },
      { seq: 6, type: 'step/start', data: { turn: 1, step: 2 } },
      { seq: 7, type: 'assistant/message', data: { turn: 1, step: 2, content: [{ type: 'text', text: 'one' }] } },
      { seq: 8, type: 'step/end', data: { turn: 1, step: 2 } },
      { seq: 9, type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } },
    ])
  })

  it('a crash closer answers a call with a function_call_result carrying the crash text', () => {
    const opened = openTurn(1)
    const call: AgentInputItem = { type: 'function_call', name: 'hang', callId: 'c9', status: 'completed', arguments: '{}' }
    const { drafts } = encodeItems([{ type: 'message', role: 'user', content: 'go' }, call], opened.state, { provisional: true })
    const events = stamp([opened.draft, ...drafts])
    const repaired = [...events, ...computeClosers(events, 0)]
    expect(decodeItems(repaired)).toEqual([
      { type: 'message', role: 'user', content: 'go' },
      call,
      { type: 'function_call_result', name: 'hang', callId: 'c9', status: 'incomplete', output: { type: 'text', text: INTERRUPTED_TOOL_TEXT } },
    ])
  })

  it('items written ahead of a run give nothing once the run completed its turn without them', () => {
    const opened = openTurn(1)
    const ahead = encodeItems([{ type: 'message', role: 'user', content: 'lost' }], opened.state, { provisional: true })
    const events = stamp([opened.draft, ...ahead.drafts, ...closeTurn(ahead.state, 'completed')])
    expect(decodeItems(events)).toEqual([])
    const aborted = stamp([opened.draft, ...ahead.drafts, ...closeTurn(ahead.state, 'aborted')])
    expect(decodeItems(aborted)).toEqual([{ type: 'message', role: 'user', content: 'lost' }])
  })

  it('history/rewind drops the items placed at or after `to`, in any later turn', () => {
    fc.assert(
      fc.property(batches(), fc.nat(), (all, pick) => {
        const events = encodeTurns(all)
        const carrying = events.filter((e) => e[ITEM_FIELD] !== undefined)
        const cut = carrying.length === 0 ? 0 : pick % (carrying.length + 1)
        const to = carrying[cut]?.seq ?? events.length
        const rewound = [...events, { seq: events.length, type: 'history/rewind', time: 1000, data: { to } }]
        expect(decodeItems(rewound)).toEqual(all.flat().slice(0, cut))
      }),
      { numRuns: 200 },
    )
  })
})

describe('itemKey (what tells a repeated item from a new one)', () => {
  it('is the same whatever the key order, and tells apart items that differ only in a field named __proto__', async () => {
    const { itemKey } = await import('../src/adapters/openai-agents/item-kind.js')
    expect(itemKey({ type: 'message', role: 'user', content: 'a' })).toBe(itemKey({ content: 'a', role: 'user', type: 'message' }))
    const plain = { type: 'message', role: 'user', content: 'a', providerData: {} }
    const withProto = JSON.parse('{"type":"message","role":"user","content":"a","providerData":{"__proto__":{"x":1}}}')
    expect(itemKey(withProto)).not.toBe(itemKey(plain))
    expect(itemKey(withProto)).toContain('"__proto__":{"x":1}')
  })
})
