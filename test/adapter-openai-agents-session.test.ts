// JsonlSession as the Agents SDK's Session: round trips, getItems(limit), pop and clear as
// appends, one writer per session, bad inputs; over the JSONL backend and the in-memory reference.
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { AgentInputItem, FunctionCallItem } from '@openai/agents'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { ITEM_FIELD, JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { RECORDER } from '../src/adapters/openai-agents/jsonl-session.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import { toModelHistory } from '../src/session/history.js'
import { agentItem, batches } from './fixtures/openai-agents-items.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'
const roots: string[] = []
const newRoot = async () => {
  const root = await mkdtemp(join(tmpdir(), 'spj-oa-session-'))
  roots.push(root)
  return root
}
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p)
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : `foreign: ${String(err)}`
  }
}

const logPath = (persistence: ReturnType<typeof createJsonlPersistence>, id: string) =>
  persistence.locate({ id, createdAt: 0, delegationDepth: 0 }).path
const eventsOf = async (path: string) =>
  (await readFile(path, 'utf8')).trimEnd().split('\n').slice(1).map((l) => JSON.parse(l) as Record<string, unknown>)

const backends: [string, () => Promise<() => SessionPersistence>][] = [
  ['jsonl', async () => {
    const root = await newRoot()
    return () => createJsonlPersistence({ root, sync: 'none' })
  }],
  ['memory', async () => {
    const name = `oa-${Math.random()}`
    return () => createMemoryPersistence({ name })
  }],
]

describe.each(backends)('JsonlSession over %s', (_name, backend) => {
  it('round trip: items come back deep-equal after a reopen, and getItems(limit) gives the most recent', async () => {
    await fc.assert(
      fc.asyncProperty(batches(), fc.integer({ min: -2, max: 40 }), async (all, limit) => {
        const open = await backend()
        const id = 'rt'
        const first = new JsonlSession({ persistence: open(), sessionId: id })
        for (const batch of all) await first.addItems(batch)
        const flat = all.flat()
        expect(await first.getItems()).toEqual(flat)
        await first.close()
        const second = new JsonlSession({ persistence: open(), sessionId: id })
        expect(await second.getItems()).toEqual(flat)
        expect(await second.getItems(limit)).toEqual(limit <= 0 ? [] : flat.slice(-limit))
        await second.close()
      }),
      { numRuns: 40 },
    )
  })

  it('pop and clear behave like the SDK MemorySession (model-based)', async () => {
    const op = fc.oneof(
      fc.array(agentItem(), { minLength: 1, maxLength: 3 }).map((items) => ({ kind: 'add' as const, items })),
      fc.constant({ kind: 'pop' as const }),
      fc.constant({ kind: 'clear' as const }),
      fc.constant({ kind: 'reopen' as const }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 12 }), async (ops) => {
        const open = await backend()
        let session = new JsonlSession({ persistence: open(), sessionId: 'pop' })
        let model: AgentInputItem[] = []
        for (const o of ops) {
          if (o.kind === 'add') {
            await session.addItems(o.items)
            model.push(...o.items)
          } else if (o.kind === 'pop') {
            expect(await session.popItem()).toEqual(model.pop())
          } else if (o.kind === 'clear') {
            await session.clearSession()
            model = []
          } else {
            await session.close()
            session = new JsonlSession({ persistence: open(), sessionId: 'pop' })
          }
          expect(await session.getItems()).toEqual(model)
        }
        await session.close()
      }),
      { numRuns: 40 },
    )
  })

  it('calls and results recorded ahead of the run are stored once when addItems repeats them', async () => {
    await fc.assert(
      fc.asyncProperty(batches(), async (all) => {
        const open = await backend()
        const session = new JsonlSession({ persistence: open(), sessionId: 'ahead' })
        const recorder = session[RECORDER]
        for (const batch of all) {
          // As trackToolCalls does: each call before its tool runs, then its result.
          for (const item of batch) {
            if (item.type !== 'function_call') continue
            await recorder.recordCall({ ...item, id: item.callId } as FunctionCallItem)
            await recorder.recordResult(item as FunctionCallItem, 'ok')
            recorder.settled()
          }
          await session.addItems(batch)
        }
        expect(await session.getItems()).toEqual(all.flat())
        await session.close()
        const reopened = new JsonlSession({ persistence: open(), sessionId: 'ahead' })
        expect(await reopened.getItems()).toEqual(all.flat())
        await reopened.close()
      }),
      { numRuns: 40 },
    )
  })

  // `popItem` appends a rewind: what the session knows of open calls follows the history view.
  const call0: AgentInputItem = { type: 'function_call', callId: 'call_0', name: 'f', arguments: '{}', status: 'completed' }
  const result0 = (text: string): AgentInputItem => ({ type: 'function_call_result', callId: 'call_0', name: 'f', status: 'completed', output: { type: 'text', text } })
  const historyOf = async (persistence: SessionPersistence, id: string) =>
    toModelHistory((await persistence.inspect(id)).events).messages.map((m) => `${m.role}:${m.role === 'tool' ? m.callId : JSON.stringify(m.content)}`)

  it('a call popped, then made again under the same id (call_0), is recorded anew: the history holds it and its result', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'pop-call' })
    await session.addItems([{ type: 'message', role: 'user', content: 'one' }, call0])
    expect(await session.popItem()).toEqual(call0)
    await session.addItems([{ type: 'message', role: 'user', content: 'two' }, call0, result0('ok')])
    expect(await session.getItems()).toEqual([{ type: 'message', role: 'user', content: 'one' }, { type: 'message', role: 'user', content: 'two' }, call0, result0('ok')])
    await session.close()
    expect(await historyOf(open(), 'pop-call')).toEqual([
      'user:"one"',
      'user:"two"',
      `assistant:${JSON.stringify([{ type: 'tool-call', callId: 'call_0', name: 'f', arguments: {} }])}`,
      'tool:call_0',
    ])
  })

  it('a result popped opens its call again: the call handed over again with a new result is not stored twice', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'pop-result' })
    await session.addItems([{ type: 'message', role: 'user', content: 'one' }, call0, result0('first')])
    expect(await session.popItem()).toEqual(result0('first'))
    await session.addItems([call0, result0('second')])
    // The items as added (the call twice); the vocabulary holds the call once.
    expect(await session.getItems()).toEqual([{ type: 'message', role: 'user', content: 'one' }, call0, call0, result0('second')])
    await session.close()
    const history = await historyOf(open(), 'pop-result')
    expect(history.filter((m) => m.startsWith('assistant:'))).toHaveLength(1)
    expect(history).toEqual(['user:"one"', `assistant:${JSON.stringify([{ type: 'tool-call', callId: 'call_0', name: 'f', arguments: {} }])}`, 'tool:call_0'])
  })

  it('a rewind whose `to` is not a seq before it (written by another tool) is ignored, as the history view ignores it', async () => {
    const open = await backend()
    const session = new JsonlSession({ persistence: open(), sessionId: 'odd-rewind' })
    const items: AgentInputItem[] = [{ type: 'message', role: 'user', content: 'a' }, { type: 'message', role: 'user', content: 'b' }]
    await session.addItems(items)
    await session.close()
    const p = open()
    const { events, firstSeq } = await p.load('odd-rewind')
    const next = firstSeq + events.length
    await p.append('odd-rewind', [-1, 1.5, next + 5].map((to, i) => ({ seq: next + i, type: 'history/rewind', time: 1, data: { to } })))
    await p.close('odd-rewind')
    const reopened = new JsonlSession({ persistence: open(), sessionId: 'odd-rewind' })
    expect(await reopened.getItems()).toEqual(items)
    expect(toModelHistory((await open().inspect('odd-rewind')).events).messages.map((m) => m.content)).toEqual(['a', 'b'])
    await reopened.close()
  })

  it('two instances over one store: the second gets E_LOCKED while the first writes', async () => {
    const open = await backend()
    const first = new JsonlSession({ persistence: open(), sessionId: 'shared' })
    await first.addItems([{ type: 'message', role: 'user', content: 'mine' }])
    const second = new JsonlSession({ persistence: open(), sessionId: 'shared' })
    expect(await codeOf(second.getItems())).toBe('E_LOCKED')
    expect(await codeOf(second.addItems([{ type: 'message', role: 'user', content: 'theirs' }]))).toBe('E_LOCKED')
    await first.close()
    expect(await second.getItems()).toEqual([{ type: 'message', role: 'user', content: 'mine' }])
    await second.close()
  })
})

describe('JsonlSession on disk', () => {
  it('pop and clear only append: every earlier byte stays as it was', async () => {
    const root = await newRoot()
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: 'bytes' })
    const a: AgentInputItem = { type: 'message', role: 'user', content: 'a' }
    const b: AgentInputItem = { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'b' }] }
    await session.addItems([a, b])
    const path = logPath(persistence, 'bytes')
    const v1 = await readFile(path)
    expect(await session.popItem()).toEqual(b)
    const v2 = await readFile(path)
    expect(v2.subarray(0, v1.length).equals(v1)).toBe(true)
    await session.clearSession()
    const v3 = await readFile(path)
    expect(v3.subarray(0, v2.length).equals(v2)).toBe(true)
    const appended = (await eventsOf(path)).filter((e) => e.type === 'history/rewind')
    expect(appended.map((e) => e.data)).toEqual([{ to: 3 }, { to: 0 }])
    expect(await session.getItems()).toEqual([])
    expect(await session.popItem()).toBeUndefined()
    await session.clearSession()
    expect((await readFile(path)).equals(v3)).toBe(true)
    await session.close()
  })

  it('creates the session lazily with its cwd, resumes it later, and keeps unknown items verbatim', async () => {
    const root = await newRoot()
    const cwd = '/projects/demo'
    const session = new JsonlSession({ persistence: createJsonlPersistence({ root }), sessionId: 'lazy', cwd, now: () => 1234 })
    const unknown = { type: 'x_future_item', payload: { nested: [1, 'two', null] }, id: 'x1' } as unknown as AgentInputItem
    await session.addItems([unknown])
    await session.close()
    const persistence = createJsonlPersistence({ root })
    const [listing] = await persistence.list()
    expect(listing?.meta).toMatchObject({ id: 'lazy', cwd, createdAt: 1234 })
    const again = new JsonlSession({ persistence, sessionId: 'lazy' })
    expect(await again.getSessionId()).toBe('lazy')
    expect(await again.getItems()).toEqual([unknown])
    await again.close()
  })

  it('stores each item verbatim beside its vocabulary event', async () => {
    const root = await newRoot()
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: 'verbatim' })
    const item: AgentInputItem = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }], providerData: { k: 1 } }
    await session.addItems([item])
    await session.close()
    const events = await eventsOf(logPath(persistence, 'verbatim'))
    expect(events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
    expect(events[1]).toMatchObject({ data: { content: [{ type: 'text', text: 'hi' }] }, [ITEM_FIELD]: item })
  })
})

describe('bad input', () => {
  it('refuses bad options with E_CONFIG and a bad id with E_INVALID_ID', async () => {
    const persistence = createMemoryPersistence()
    expect(await codeOf(() => new JsonlSession({ persistence, sessionId: '' }))).toBe('E_CONFIG')
    expect(await codeOf(() => new JsonlSession({ persistence: {} as SessionPersistence, sessionId: 'x' }))).toBe('E_CONFIG')
    expect(await codeOf(() => new JsonlSession(undefined as never))).toBe('E_CONFIG')
    expect(await codeOf(() => new JsonlSession({ persistence, sessionId: 'x', cwd: 7 as never }))).toBe('E_CONFIG')
    const lone = new JsonlSession({ persistence, sessionId: '\uD800' })
    expect(await codeOf(lone.getItems())).toBe('E_INVALID_ID')
  })

  it('refuses bad items and limits, and stays usable afterwards', async () => {
    const root = await newRoot()
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: 'bad' })
    const good: AgentInputItem = { type: 'message', role: 'user', content: 'ok' }
    await session.addItems([good])
    const before = await readFile(logPath(persistence, 'bad'))
    expect(await codeOf(session.addItems('nope' as never))).toBe('E_INVALID_EVENT')
    expect(await codeOf(session.addItems([good, 42 as never]))).toBe('E_INVALID_EVENT')
    expect(await codeOf(session.addItems([null as never]))).toBe('E_INVALID_EVENT')
    expect(await codeOf(session.addItems([{ type: 'message', role: 'user', content: 'big', n: 1n } as never]))).toBe('E_NOT_JSON')
    expect(await codeOf(session.getItems(1.5))).toBe('E_CONFIG')
    expect(await codeOf(session.getItems(Number.NaN))).toBe('E_CONFIG')
    expect((await readFile(logPath(persistence, 'bad'))).equals(before)).toBe(true)
    await session.addItems([good])
    expect(await session.getItems()).toEqual([good, good])
    await session.close()
  })

  it('refuses an item holding a function or a Symbol with E_NOT_JSON naming the path, and writes nothing', async () => {
    const root = await newRoot()
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: 'clone' })
    const good: AgentInputItem = { type: 'message', role: 'user', content: 'ok' }
    await session.addItems([good])
    const before = await readFile(logPath(persistence, 'clone'))
    const refusal = async (items: unknown[]) => {
      try {
        await session.addItems(items as AgentInputItem[])
        return 'resolved'
      } catch (err) {
        return isSessionPersistenceError(err) ? `${err.code}: ${err.message}` : `foreign: ${String(err)}`
      }
    }
    expect(await refusal([{ ...good, extra: () => 1 }])).toBe('E_NOT_JSON: addItems: items[0].extra is a function')
    expect(await refusal([good, { ...good, extra: Symbol('x') }])).toBe('E_NOT_JSON: addItems: items[1].extra is a Symbol')
    expect(await refusal([{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a', f() {} }] }])).toBe(
      'E_NOT_JSON: addItems: items[0].content[0].f is a function',
    )
    expect((await readFile(logPath(persistence, 'clone'))).equals(before)).toBe(true)
    expect(await session.getItems()).toEqual([good])
    await session.close()
    // Refused before the session is even opened: a fresh one creates nothing.
    const fresh = new JsonlSession({ persistence, sessionId: 'fresh' })
    expect(await codeOf(fresh.addItems([{ ...good, extra: Symbol('y') } as never]))).toBe('E_NOT_JSON')
    expect(await fresh.getItems()).toEqual([])
    await fresh.close()
  })

  it('trackToolCalls refuses what is not an agent or a JsonlSession', async () => {
    const session = new JsonlSession({ persistence: createMemoryPersistence(), sessionId: 't' })
    expect(await codeOf(() => trackToolCalls({} as never, session))).toBe('E_CONFIG')
    expect(await codeOf(() => trackToolCalls({ tools: [], on() {}, off() {} } as never, {} as never))).toBe('E_CONFIG')
  })
})
