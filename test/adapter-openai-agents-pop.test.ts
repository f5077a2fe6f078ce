// JsonlSession.popItem after runs tracked by trackToolCalls: what getItems shows and what the
// history view (§7: toModelHistory, which show/export and the other adapters read) shows agree
// on every step — pop one, pop several across a call and its result, pop after a compaction,
// pop then add again, and a resume (a new JsonlSession over the same store). A tracked item's
// vocabulary event lies before the event of the run's addItems that placed it: a pop must take
// out that earlier event too, not only the placement.
import type { AgentInputItem, FunctionCallItem } from '@openai/agents'
import { Agent, run, tool } from '@openai/agents'
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents-core/testing'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { RECORDER } from '../src/adapters/openai-agents/jsonl-session.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { historyView, itemsView, unanswered } from './helpers/openai-agents-views.js'
import { tmpRoot } from './helpers/tmp-root.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'

interface Store {
  open: () => SessionPersistence
  persistence: SessionPersistence
  id: string
}

/**
 * getItems and the history view of the log agree: the same items, in the same order (or as
 * multisets, `order: false`), the view adding only a synthetic result per call left without one;
 * getItems(limit) is the last `limit` of them. Returns the items.
 */
async function expectAgree(session: JsonlSession, store: Store, order = true): Promise<AgentInputItem[]> {
  const items = await session.getItems()
  const { shown, synthetic } = historyView((await store.persistence.read(store.id)).events)
  const view = itemsView(items)
  if (order) expect(shown).toEqual(view)
  else expect([...shown].sort()).toEqual([...view].sort())
  expect(synthetic).toEqual(unanswered(items))
  for (let limit = 1; limit <= items.length + 1; limit++) expect(await session.getItems(limit)).toEqual(items.slice(-limit))
  return items
}

/** Closes `session`; a new JsonlSession over the same store (a new backend instance) shows the same items, which agree. */
async function resume(session: JsonlSession, store: Store, order = true): Promise<JsonlSession> {
  const before = await session.getItems()
  await session.close()
  const again = new JsonlSession({ persistence: store.open(), sessionId: store.id })
  expect(await again.getItems()).toEqual(before)
  expect(await expectAgree(again, store, order)).toEqual(before)
  return again
}

async function jsonlStore(id: string): Promise<Store> {
  const root = await tmpRoot()
  const open = () => createJsonlPersistence({ root, sync: 'none' })
  return { open, persistence: open(), id }
}

const add = tool({
  name: 'add',
  description: 'adds',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => String(a + b),
})

const reasoning = (text: string) => ({ type: 'reasoning' as const, content: [{ type: 'input_text' as const, text }] })

/**
 * A tracked run (the reviewer's): add 1+2 (call_1), then 3+3 (call_2), then the answer; with
 * `reasons`, the model reasons before each call (items the run writes only when it hands them over).
 */
async function trackedRun(session: JsonlSession, input = 'Add 1 and 2, then double it.', ids = ['call_1', 'call_2'], answer = 'It is 3, then 6.', reasons = false) {
  const think = (text: string) => (reasons ? [reasoning(text)] : [])
  const model = new ScriptedModel([
    [...think('r1'), functionCall('add', { a: 1, b: 2 }, { callId: ids[0]! })],
    [...think('r2'), functionCall('add', { a: 3, b: 3 }, { callId: ids[1]! })],
    [assistantMessage(answer)],
  ])
  const agent = new Agent({ name: 'Calc', instructions: 'Add.', model, tools: [add] })
  const untrack = trackToolCalls(agent, session)
  try {
    expect((await run(agent, input, { session })).finalOutput).toBe(answer)
  } finally {
    untrack()
  }
}

const RUN = ['user Add 1 and 2, then double it.', 'call call_1', 'result call_1 3', 'call call_2', 'result call_2 6', 'assistant It is 3, then 6.']

describe('popItem after a tracked run: getItems and the history view agree', () => {
  it('pop one, then pop several across a call and its result, down to nothing; a resume on the way and at the end', async () => {
    const store = await jsonlStore('pop-all')
    let session = new JsonlSession({ persistence: store.persistence, sessionId: store.id })
    await trackedRun(session)
    expect(itemsView(await expectAgree(session, store))).toEqual(RUN)
    for (let n = RUN.length - 1; n >= 0; n--) {
      const popped = await session.popItem()
      expect(itemsView([popped!])).toEqual([RUN[n]])
      expect(itemsView(await expectAgree(session, store))).toEqual(RUN.slice(0, n))
      if (n === 3) {
        session = await resume(session, store)
      }
    }
    expect(await session.popItem()).toBeUndefined()
    await resume(session, store)
  })

  it('pop after a compaction, for every number of items kept (of a plain batch, then a tracked run, reasoning or not); then a resume', async () => {
    for (const reasons of [false, true]) {
      // With reasoning, the history view shows each reasoning item after the tracked call and
      // result before it (the run writes it only when it hands its items over): compared as multisets.
      const order = !reasons
      for (let keepItems = 0; keepItems <= RUN.length + (reasons ? 3 : 1); keepItems++) {
        // Kept from call_2 or call_1 on, without r1: the compaction's history view starts at the
        // tracked call, before r1's event, and shows r1 already, before any pop (not a pop's doing).
        if (reasons && keepItems >= 3 && keepItems <= 6) continue
        const store = await jsonlStore(`pop-compact-${reasons}-${keepItems}`)
        let session = new JsonlSession({ persistence: store.persistence, sessionId: store.id })
        await session.addItems([
          { type: 'message', role: 'user', content: 'Hello.' },
          { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hi.' }] },
        ])
        await trackedRun(session, undefined, undefined, undefined, reasons)
        await session.compact({ summary: 'S', keepItems })
        let items = await expectAgree(session, store, order)
        // Down to the summary, then the summary itself.
        while (items.length > 0) {
          expect(await session.popItem()).toEqual(items.at(-1))
          const next = await expectAgree(session, store, order)
          expect(next).toEqual(items.slice(0, -1))
          items = next
          if (items.length === 3) session = await resume(session, store, order)
        }
        await resume(session, store, order)
      }
    }
  })

  it('pop the answer and the last result, then add a new result and answer: the history view shows the new ones', async () => {
    const store = await jsonlStore('pop-add')
    let session = new JsonlSession({ persistence: store.persistence, sessionId: store.id })
    await trackedRun(session)
    await session.popItem()
    await session.popItem()
    expect(itemsView(await expectAgree(session, store))).toEqual(RUN.slice(0, 4))
    const again: AgentInputItem[] = [
      { type: 'function_call_result', name: 'add', callId: 'call_2', status: 'completed', output: { type: 'text', text: '7' } },
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'It is 7.' }] },
    ]
    await session.addItems(again)
    expect(itemsView(await expectAgree(session, store))).toEqual([...RUN.slice(0, 4), 'result call_2 7', 'assistant It is 7.'])
    session = await resume(session, store)
    // A second tracked run on top, its answer and last result popped, then a third run.
    await trackedRun(session, 'Again.', ['call_3', 'call_4'], 'Done.')
    await session.popItem()
    await session.popItem()
    await expectAgree(session, store)
    await session.compact({ summary: 'S2', keepItems: 3 })
    await session.popItem()
    await expectAgree(session, store)
    await trackedRun(session, 'Once more.', ['call_5', 'call_6'], 'Over.')
    const items = itemsView(await expectAgree(session, store))
    expect(items[0]).toBe('summary S2')
    expect(items.slice(-6)).toEqual(['user Once more.', 'call call_5', 'result call_5 3', 'call call_6', 'result call_6 6', 'assistant Over.'])
    await resume(session, store)
  })

  it('a run whose model reasons before each call: the reasoning placed between is written again, once', async () => {
    const store = await jsonlStore('pop-reasoning')
    let session = new JsonlSession({ persistence: store.persistence, sessionId: store.id })
    await trackedRun(session, undefined, undefined, undefined, true)
    // The history view shows a reasoning item after the tracked call and result before it: compared as multisets.
    const full = await expectAgree(session, store, false)
    expect(itemsView(full)).toEqual(['user Add 1 and 2, then double it.', 'reasoning r1', 'call call_1', 'result call_1 3', 'reasoning r2', 'call call_2', 'result call_2 6', 'assistant It is 3, then 6.'])
    for (let n = full.length - 1; n >= 0; n--) {
      expect(await session.popItem()).toEqual(full[n])
      expect(await expectAgree(session, store, false)).toEqual(full.slice(0, n))
      if (n === 5) session = await resume(session, store, false)
    }
    await resume(session, store, false)
  })
})

// ---------------------------------------------------------------------------------------------
// Any sequence: plain and tracked batches (as trackToolCalls records them), pops, compactions
// and resumes; after each step getItems and the history view agree, and so does a resume.

type Op = { kind: 'add'; calls: number } | { kind: 'tracked'; calls: number } | { kind: 'pop'; n: number } | { kind: 'compact'; keep: number } | { kind: 'reopen' }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.nat(2).map((calls): Op => ({ kind: 'add', calls })) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }).map((calls): Op => ({ kind: 'tracked', calls })) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }).map((n): Op => ({ kind: 'pop', n })) },
  { weight: 1, arbitrary: fc.nat(5).map((keep): Op => ({ kind: 'compact', keep })) },
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'reopen' }) },
)

describe('popItem in any sequence of batches, tracked runs, compactions and resumes', () => {
  it('keeps getItems and the history view in agreement on every step (in-memory backend)', async () => {
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 10 }), async (ops) => {
        const name = `pop-prop-${Math.random()}`
        const open = () => createMemoryPersistence({ name })
        const store: Store = { open, persistence: open(), id: `p${n++}` }
        let session = new JsonlSession({ persistence: store.persistence, sessionId: store.id })
        let k = 0
        let written = false
        for (const o of ops) {
          if (o.kind === 'add' || o.kind === 'tracked') {
            const b = k++
            const items: AgentInputItem[] = [{ type: 'message', role: 'user', content: `u${b}` }]
            const calls: FunctionCallItem[] = []
            for (let c = 0; c < o.calls; c++) {
              const call = { type: 'function_call', name: 'add', callId: `c${b}.${c}`, status: 'completed', arguments: `{"c":${c}}` } as const
              calls.push(call as FunctionCallItem)
              items.push(call, { type: 'function_call_result', name: 'add', callId: call.callId, status: 'completed', output: { type: 'text', text: `r${c}` } })
            }
            items.push({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `a${b}` }] })
            if (o.kind === 'tracked') {
              // As trackToolCalls does: the run's input staged, each call durable before its tool runs, then its result.
              const recorder = session[RECORDER]
              recorder.stageInput([...(await session.getItems()), items[0]!])
              for (const [c, call] of calls.entries()) {
                await recorder.recordCall({ ...call, id: `x${c}` } as FunctionCallItem)
                await recorder.recordResult(call, `r${c}`)
                recorder.settled()
              }
            }
            await session.addItems(items)
            written = true
          } else if (o.kind === 'pop') {
            for (let i = 0; i < o.n; i++) {
              const before = await session.getItems()
              expect(await session.popItem()).toEqual(before.at(-1))
            }
          } else if (o.kind === 'compact') {
            await session.compact({ summary: `s${k++}`, keepItems: o.keep })
            written = true
          } else if (written) session = await resume(session, store)
          else {
            await session.close()
            session = new JsonlSession({ persistence: store.open(), sessionId: store.id })
          }
          if (written) await expectAgree(session, store)
        }
        if (written) await resume(session, store)
        else await session.close()
      }),
      { numRuns: 40 },
    )
  })
})
