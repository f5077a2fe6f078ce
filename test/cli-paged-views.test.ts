import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { type Io, resolveListed } from '../src/cli/commands.js'
import type { OpenedRoot } from '../src/cli/open-root.js'
import { makeStyle } from '../src/cli/render.js'
import { exportSession, show } from '../src/cli/show.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import type { SessionEvent, SessionStore } from '../src/index.js'

// `show` and `export` of a log too big to inspect read it in pages through `read`, with a first
// pass for what later events say of earlier ones. These tests make a store report every log as
// huge, so that each page holds one event, and check that the paged views equal the views of
// the same log held in memory (inspect), page boundaries anywhere.

/** The store as it is, or one whose listing calls every log a terabyte (pages of one event). */
function rootOf(store: SessionStore, huge: boolean): OpenedRoot {
  const s = huge
    ? new Proxy(store, {
        get(target, prop, receiver) {
          if (prop === 'list') return async (o?: Parameters<SessionStore['list']>[0]) => (await target.list(o)).map((l) => ({ ...l, sizeBytes: 1e12 }))
          const v = Reflect.get(target, prop, receiver)
          return typeof v === 'function' ? v.bind(target) : v
        },
      })
    : store
  return { store: s, name: 'memory', directory: undefined, close: async () => {} }
}

function capture(): { io: Io; text: () => string } {
  const out: string[] = []
  return { io: { out: (s) => out.push(s), err: () => {}, style: makeStyle(false), progress: undefined }, text: () => out.join('') }
}

async function render(store: SessionStore, id: string, huge: boolean, what: 'show' | 'md' | 'json'): Promise<string> {
  const { io, text } = capture()
  const root = rootOf(store, huge)
  const target = await resolveListed(root.store, id)
  if (what === 'show') await show(root, io, target, { json: false, raw: false, page: undefined })
  else await exportSession(root, io, target, { format: what, out: undefined })
  return text()
}

let t = 1_000
const e = (seq: number, type: string, data?: unknown, ignorable = false): SessionEvent =>
  ({ seq, type, time: ++t, ...(data === undefined ? {} : { data }), ...(ignorable ? { ignorable: true } : {}) }) as SessionEvent

/** A log of turns made from a list of steps: messages, calls with or without results, chunks, rewinds, compactions, unknown events. */
type Step = 'user' | 'chunk' | 'call' | 'lost-call' | 'result-later' | 'rewind' | 'compact' | 'bad-compact' | 'unknown' | 'end-turn'
function build(steps: Step[], openAtEnd: boolean): SessionEvent[] {
  const events: SessionEvent[] = []
  let turn = 0
  let open = false
  let call = 0
  const late: string[] = []
  const add = (type: string, data?: unknown, ignorable = false) => events.push(e(events.length, type, data, ignorable))
  const startTurn = () => {
    if (!open) {
      add('turn/start', { turn: ++turn })
      open = true
    }
  }
  for (const step of steps) {
    if (step !== 'end-turn') startTurn()
    switch (step) {
      case 'user':
        add('user/message', { content: `message ${events.length}` })
        break
      case 'chunk':
        add('assistant/chunk', { turn, step: 0, chunk: { text: 'x' } })
        add('assistant/chunk', { turn, step: 0, chunk: { text: 'y' } })
        add('assistant/message', { turn, step: 0, content: [{ type: 'text', text: `streamed ${events.length}` }] })
        break
      case 'call':
      case 'lost-call':
      case 'result-later': {
        const callId = `c${++call}`
        add('assistant/message', { turn, step: 0, content: [{ type: 'tool-call', callId, name: 'bash', arguments: { n: call } }] })
        if (step === 'call') add('tool/result', { turn, step: 0, callId, content: [{ type: 'text', text: `out ${callId}` }] })
        if (step === 'result-later') late.push(callId)
        break
      }
      case 'rewind':
        add('history/rewind', { to: Math.max(0, events.length - 3) })
        break
      case 'compact':
        add('history/compact', { summary: `summary at ${events.length}`, firstKeptSeq: Math.max(0, events.length - 2) })
        break
      case 'bad-compact':
        add('history/compact', { summary: 'x', firstKeptSeq: events.length + 5 })
        break
      case 'unknown':
        add('tool/output', { part: events.length }, true)
        break
      case 'end-turn':
        for (const callId of late.splice(0)) add('tool/result', { turn, step: 0, callId, content: [{ type: 'text', text: `late ${callId}` }] })
        if (open) add('turn/end', { turn, reason: { kind: 'completed' } })
        open = false
        break
    }
  }
  if (!openAtEnd && open) add('turn/end', { turn, reason: { kind: 'completed' } })
  return events
}

async function storeWith(events: SessionEvent[]): Promise<SessionStore> {
  const store = createMemoryPersistence()
  await store.create({ id: 's', createdAt: 0, delegationDepth: 0 })
  if (events.length > 0) await store.append('s', events)
  await store.closeAll()
  return store
}

const STEPS: Step[] = ['user', 'chunk', 'call', 'lost-call', 'result-later', 'rewind', 'compact', 'bad-compact', 'unknown', 'end-turn']

/** The transcript after its header (the lines about the session and its repair). */
const body = (text: string) => text.split('\n').slice(text.split('\n').findIndex((l) => l === '' || l.startsWith('request')))

describe('show and export in pages equal the same views of the log in memory', () => {
  test('transcript, Markdown and the events of JSON, for random logs split into pages of one event', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...STEPS), { maxLength: 40 }), fc.boolean(), async (steps, openAtEnd) => {
        const store = await storeWith(build(['user', ...steps], openAtEnd)) // a log with no event is not stored
        const whole = await render(store, 's', false, 'show')
        const paged = await render(store, 's', true, 'show')
        expect(body(paged)).toEqual(body(whole))
        expect(await render(store, 's', true, 'md')).toBe(await render(store, 's', false, 'md'))
        const inspected = JSON.parse(await render(store, 's', false, 'json'))
        const read = JSON.parse(await render(store, 's', true, 'json'))
        const closers = inspected.repair?.closers.length ?? 0
        expect(read.events).toEqual(inspected.events.slice(0, inspected.events.length - closers))
        expect(read.length).toBe(read.events.length)
      }),
      { numRuns: 60 },
    )
  })

  test('an open final turn: the paged view marks the closers a repair would write and says a torn tail was not looked for', async () => {
    const store = await storeWith(build(['user', 'lost-call'], true))
    const paged = await render(store, 's', true, 'show')
    expect(paged).toContain('needs repair: the last turn is open; 2 closing event(s) would be written (a torn tail is not looked for')
    expect(paged).toContain('⚠ interrupted [a repair would write this]')
    expect(paged).toContain('── end of turn 1 (interrupted) [a repair would write this]')
    expect(paged).not.toContain('⚠ no result recorded') // the closer answers the call
  })
})

describe('history/compact in the views', () => {
  const events = [
    e(0, 'turn/start', { turn: 1 }),
    e(1, 'user/message', { content: 'first question' }),
    e(2, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'first answer' }] }),
    e(3, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
    e(4, 'turn/start', { turn: 2 }),
    e(5, 'user/message', { content: 'second question' }),
    e(6, 'history/compact', { summary: 'The user asked twice.', firstKeptSeq: 5 }),
    e(7, 'assistant/message', { turn: 2, step: 0, content: [{ type: 'text', text: 'second answer' }] }),
    e(8, 'turn/end', { turn: 2, reason: { kind: 'completed' } }),
  ]

  test('the transcript shows the summary, what it replaces, and marks the replaced messages', async () => {
    const store = await storeWith(events)
    for (const huge of [false, true]) {
      const lines = (await render(store, 's', huge, 'show')).split('\n')
      expect(lines).toContain('user: first question [compacted]')
      expect(lines).toContain('assistant: first answer [compacted]')
      expect(lines).toContain('user: second question')
      expect(lines).toContain("⇤ history compacted: the summary replaces 2 message(s) before seq 5 in the model's history; in force")
      expect(lines).toContain('  summary: The user asked twice.')
      expect(lines).toContain('assistant: second answer')
    }
  })

  test('Markdown: a paragraph for the compaction and its summary, a note before each replaced message', async () => {
    const md = await render(await storeWith(events), 's', false, 'md')
    expect(md).toContain("*(compacted: seq 1 is replaced in the model's history by the summary at seq 6)*\n\n**User:** first question")
    expect(md).toContain("*⇤ history compacted: the summary replaces 2 message(s) before seq 5 in the model's history; in force.*\n\n**Summary:** The user asked twice.")
    expect(md).toContain('\n\n**User:** second question')
    expect(md).not.toContain("(compacted: seq 5")
  })

  test('a compaction undone by a rewind, and one superseded by a later one, say so; only the one in force marks messages', async () => {
    const more = [
      ...events,
      e(9, 'history/rewind', { to: 6 }), // undoes the compaction at 6 (and drops the answer at 7)
      e(10, 'history/compact', { summary: 'Older.', firstKeptSeq: 1 }),
      e(11, 'history/compact', { summary: 'Newest.', firstKeptSeq: 2 }),
    ]
    const lines = (await render(await storeWith(more), 's', false, 'show')).split('\n')
    expect(lines).toContain("⇤ history compacted: the summary replaces 2 message(s) before seq 5 in the model's history; undone by a later rewind")
    expect(lines).toContain("⇤ history compacted: the summary replaces 0 message(s) before seq 1 in the model's history; superseded by the compaction at seq 11")
    expect(lines).toContain("⇤ history compacted: the summary replaces 1 message(s) before seq 2 in the model's history; in force")
    expect(lines).toContain('user: first question [compacted]')
    expect(lines).toContain('assistant: first answer')
    expect(lines).toContain('assistant: second answer [rewound]')
  })
})
