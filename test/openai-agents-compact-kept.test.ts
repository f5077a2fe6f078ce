// JsonlSession.compact({ keepItems }) after runs whose tool calls trackToolCalls recorded: the
// call, its result and the run's input were written ahead of the run's addItems, which only
// places them later. The compaction's firstKeptSeq must reach back to those events, so that the
// package's history view (toModelHistory: the CLI's show and export), a tail load and a resume
// keep what getItems keeps.
import type { AgentInputItem, FunctionCallItem } from '@openai/agents'
import { Agent, run, RunState, tool } from '@openai/agents'
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents-core/testing'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, summaryItem, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { RECORDER } from '../src/adapters/openai-agents/jsonl-session.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { type ModelHistory, toModelHistory } from '../src/session/history.js'
import type { SessionPersistence } from '../src/persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { tmpRoot } from './helpers/tmp-root.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'

const add = tool({
  name: 'add',
  description: 'adds',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => String(a + b),
})

/** Two tracked runs: the first calls `add` twice (two steps), the second answers without tools. */
async function trackedSession(persistence: SessionPersistence, id: string): Promise<JsonlSession> {
  const model = new ScriptedModel([
    [functionCall('add', { a: 1, b: 2 }, { callId: 'call_1' })],
    [functionCall('add', { a: 3, b: 3 }, { callId: 'call_2' })],
    [assistantMessage('It is 3, then 6.')],
    [assistantMessage('Noted.')],
  ])
  const agent = new Agent({ name: 'Calc', instructions: 'Add.', model, tools: [add] })
  const session = new JsonlSession({ persistence, sessionId: id })
  const untrack = trackToolCalls(agent, session)
  await run(agent, 'Add 1 and 2, then double it.', { session })
  await run(agent, 'Remember it.', { session })
  untrack()
  return session
}

/** What an item list and a history view hold, by kind, comparable. */
function itemsView(items: readonly AgentInputItem[]): string[] {
  return items.map((i) => {
    const o = i as { type: string; role?: string; callId?: string; content?: unknown }
    if (o.type === 'function_call') return `call ${o.callId}`
    if (o.type === 'function_call_result') return `result ${o.callId}`
    const content = o.content
    const text = typeof content === 'string' ? content : (content as { text?: string }[]).map((p) => p.text ?? '').join('')
    return `${o.role} ${text}`
  })
}
function historyView(history: ModelHistory): string[] {
  const out: string[] = []
  for (const m of history.messages) {
    const content = m.content
    if (m.role === 'tool') {
      expect(m.synthetic, `result ${m.callId} is a real one`).toBeUndefined()
      out.push(`result ${m.callId}`)
      continue
    }
    const blocks = typeof content === 'string' ? [{ type: 'text', text: content }] : (content as { type: string; text?: string; callId?: string }[])
    const text = blocks.filter((b) => b.type === 'text').map((b) => b.text).join('')
    if (text !== '') out.push(`${m.role} ${text}`)
    for (const b of blocks) if (b.type === 'tool-call') out.push(`call ${b.callId}`)
  }
  return out
}

describe('compact({ keepItems }) after tracked runs: the history view keeps what getItems keeps', () => {
  it('for every keepItems, getItems, toModelHistory of the log and of a tail load, and a resume agree; the kept calls come with their results', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root })
    const source = await trackedSession(open(), 'src')
    const before = await source.getItems()
    await source.close()
    expect(itemsView(before)).toEqual([
      'user Add 1 and 2, then double it.',
      'call call_1',
      'result call_1',
      'call call_2',
      'result call_2',
      'assistant It is 3, then 6.',
      'user Remember it.',
      'assistant Noted.',
    ])
    const raw = (await open().read('src')).events
    for (let keep = 0; keep <= before.length; keep++) {
      const id = `k${keep}`
      const copy = open()
      await copy.create({ id, createdAt: 0, delegationDepth: 0 })
      await copy.append(id, raw)
      await copy.close(id)
      const session = new JsonlSession({ persistence: open(), sessionId: id })
      await session.compact({ summary: 'S', keepItems: keep })
      const items = await session.getItems()
      await session.close()
      // What getItems keeps: the last `keep` items, less a result whose call went with the summary.
      const kept = before.slice(before.length - keep)
      const shown = kept.filter((i) => i.type !== 'function_call_result' || kept.some((c) => c.type === 'function_call' && c.callId === i.callId))
      expect(items, `keepItems ${keep}`).toEqual([summaryItem('S'), ...shown])
      const expected = itemsView(items)

      const full = (await open().read(id)).events
      expect(historyView(toModelHistory(full)), `history of the log, keepItems ${keep}`).toEqual(expected)
      const reader = open()
      const tail = await reader.load(id, { from: 'last-compaction' })
      await reader.close(id)
      expect(tail.firstSeq, `a tail load, keepItems ${keep}`).toBeGreaterThan(0)
      expect(historyView(toModelHistory(tail.events)), `history of the tail, keepItems ${keep}`).toEqual(expected)
      const resumed = new JsonlSession({ persistence: open(), sessionId: id })
      expect(await resumed.getItems(), `a resume, keepItems ${keep}`).toEqual(items)
      await resumed.close()
      // The CLI's export marks what the summary replaced; a kept call and its result are not.
      const exported = await cli(['--root', root, 'export', id, '--format', 'md'])
      expect(exported.result).toBe(0)
      const lines = exported.out.split('\n').filter((l) => l.trim() !== '')
      const marked = (start: string) => {
        const at = lines.findIndex((l) => l.startsWith(start))
        expect(at, start).toBeGreaterThan(0)
        return lines[at - 1]!.startsWith('*(compacted:')
      }
      for (const callId of ['call_1', 'call_2']) {
        const isKept = expected.includes(`call ${callId}`)
        expect(marked(`Tool call \`add\` (${callId})`), `export: call ${callId}, keepItems ${keep}`).toBe(!isKept)
        expect(marked(`Result of ${callId}`), `export: result ${callId}, keepItems ${keep}`).toBe(!isKept)
      }
    }
  })

  it('a compaction kept from inside a tracked run survives pops of kept items and a later compaction', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root })
    const session = await trackedSession(open(), 'pop')
    const before = await session.getItems()
    // Keep the second call, its result and everything after it.
    await session.compact({ summary: 'S', keepItems: 5 })
    expect(itemsView(await session.getItems())).toEqual(['user S', 'call call_2', 'result call_2', 'assistant It is 3, then 6.', 'user Remember it.', 'assistant Noted.'])
    // Each pop of an item the compaction kept records the compaction again.
    expect(await session.popItem()).toEqual(before.at(-1))
    expect(await session.popItem()).toEqual(before.at(-2))
    const items = await session.getItems()
    expect(itemsView(items)).toEqual(['user S', 'call call_2', 'result call_2', 'assistant It is 3, then 6.'])
    await session.close()
    const full = (await open().read('pop')).events
    expect(historyView(toModelHistory(full))).toEqual(itemsView(items))
    const resumed = new JsonlSession({ persistence: open(), sessionId: 'pop' })
    expect(await resumed.getItems()).toEqual(items)
    // A second compaction on the resumed tail, keeping the call again.
    await resumed.compact({ summary: 'T', keepItems: 3 })
    const again = await resumed.getItems()
    expect(itemsView(again)).toEqual(['user T', 'call call_2', 'result call_2', 'assistant It is 3, then 6.'])
    await resumed.close()
    expect(historyView(toModelHistory((await open().read('pop')).events))).toEqual(itemsView(again))
    const third = new JsonlSession({ persistence: open(), sessionId: 'pop' })
    expect(await third.getItems()).toEqual(again)
    await third.close()
  })
})

describe('compact({ keepItems }) and calls recorded ahead of their runs, over random tracked runs', () => {
  // A run as the SDK hands it over: its input, then steps of calls (one after another, or several
  // at once, results in either order), then its answer; each call recorded as trackToolCalls
  // records it, its result after it.
  type Run = { tracked: boolean; steps: { calls: number; reversed: boolean }[] }
  const runArb: fc.Arbitrary<Run> = fc.record({
    tracked: fc.boolean(),
    steps: fc.array(fc.record({ calls: fc.integer({ min: 1, max: 2 }), reversed: fc.boolean() }), { maxLength: 3 }),
  })
  const user = (text: string): AgentInputItem => ({ type: 'message', role: 'user', content: text })
  const answer = (text: string): AgentInputItem => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] })
  const call = (callId: string): FunctionCallItem => ({ type: 'function_call', name: 'add', callId, status: 'completed', arguments: '{}' })

  it('getItems, the history view of the log and of a tail load, and a resume show the same items', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root })
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.array(runArb, { minLength: 1, maxLength: 3 }), fc.nat(12), async (runs, keep) => {
        const id = `p${n++}`
        const session = new JsonlSession({ persistence: open(), sessionId: id })
        let c = 0
        for (const [r, shape] of runs.entries()) {
          const input = user(`q${r}`)
          const items: AgentInputItem[] = [input]
          const recorder = session[RECORDER]
          if (shape.tracked) recorder.stageInput([...(await session.getItems()), input])
          for (const step of shape.steps) {
            const calls = Array.from({ length: step.calls }, () => call(`call_${c++}`))
            const results = calls.map((k) => ({ type: 'function_call_result', name: 'add', callId: k.callId, status: 'completed', output: { type: 'text', text: 'ok' } }) as AgentInputItem)
            if (shape.tracked) {
              for (const k of calls) await recorder.recordCall({ ...k, id: `fc_${k.callId}` } as FunctionCallItem)
              for (const k of step.reversed ? [...calls].reverse() : calls) await recorder.recordResult(k, 'ok')
              for (const _ of calls) recorder.settled()
            }
            items.push(...calls, ...results)
          }
          items.push(answer(`a${r}`))
          await session.addItems(items)
        }
        await session.compact({ summary: 'S', keepItems: keep })
        const got = await session.getItems()
        await session.close()
        // The same items; the history view puts each call's result right after it (§7).
        const expected = itemsView(got).sort()
        expect(historyView(toModelHistory((await open().read(id)).events)).sort()).toEqual(expected)
        const reader = open()
        const tail = await reader.load(id, { from: 'last-compaction' })
        await reader.close(id)
        expect(historyView(toModelHistory(tail.events)).sort()).toEqual(expected)
        const resumed = new JsonlSession({ persistence: open(), sessionId: id })
        expect(await resumed.getItems()).toEqual(got)
        await resumed.close()
      }),
      { numRuns: 25 },
    )
  })
})

describe('compact({ keepItems }) keeping a call an approval interrupted', () => {
  it('the approved run answers it once; getItems and the history view show the call and its result', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root })
    const echo = tool({
      name: 'echo',
      description: 'echoes after approval',
      parameters: z.object({ q: z.string() }),
      needsApproval: async () => true,
      execute: async ({ q }) => `echo:${q}`,
    })
    const model = new ScriptedModel([[assistantMessage('hello')], [functionCall('echo', { q: 'x' }, { callId: 'call_9' })]])
    const agent = new Agent({ name: 'a', model, tools: [echo], toolUseBehavior: 'stop_on_first_tool' })
    const session = new JsonlSession({ persistence: open(), sessionId: 'hitl' })
    const untrack = trackToolCalls(agent, session)
    await run(agent, 'earlier', { session })
    const first = await run(agent, 'echo x', { session })
    expect(first.interruptions).toHaveLength(1)
    // Keep the interrupted call (the run's last item): its result is not recorded yet.
    await session.compact({ summary: 'S', keepItems: 1 })
    expect(itemsView(await session.getItems())).toEqual(['user S', 'call call_9'])
    first.state.approve(first.interruptions[0]!)
    const state = await RunState.fromString(agent, first.state.toString())
    untrack()
    await session.close()
    const resumed = new JsonlSession({ persistence: open(), sessionId: 'hitl' })
    trackToolCalls(agent, resumed)
    const done = await run(agent, state, { session: resumed })
    expect(done.finalOutput).toBe('echo:x')
    const items = await resumed.getItems()
    expect(itemsView(items)).toEqual(['user S', 'call call_9', 'result call_9'])
    // Kept again, from the tail the resume read.
    await resumed.compact({ summary: 'T', keepItems: 2 })
    const again = await resumed.getItems()
    expect(itemsView(again)).toEqual(['user T', 'call call_9', 'result call_9'])
    await resumed.close()
    const full = (await open().read('hitl')).events
    expect(historyView(toModelHistory(full))).toEqual(itemsView(again))
    const third = new JsonlSession({ persistence: open(), sessionId: 'hitl' })
    expect(await third.getItems()).toEqual(again)
    await third.close()
  })
})
