// JsonlSession.popItem of an item a tracked run placed (its vocabulary event written earlier, by
// trackToolCalls) appends several events in one append: the rewind, the items it took out too,
// placed again, a compaction it undid, recorded again. On JSONL a crash can tear that append: the
// lines before the first damaged one are kept (§6), the rewind in force, the placements gone. Here
// the log is cut at every line boundary inside that append and in the middle of each of its lines
// (the rest gone, or zeroed as unsynced blocks come back), and reopened: getItems and the history
// view (toModelHistory of a load) must hold every item acknowledged before the pop but the popped
// one (every one, when the rewind's line did not land), agree, and take a further pop and add.
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { AgentInputItem } from '@openai/agents'
import { Agent, run, tool } from '@openai/agents'
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents-core/testing'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { type CrashImage, createCrashFileSystem } from '../src/testing/crash-fs.js'
import type { SessionEvent } from '../src/session/schema.js'
import { historyView, itemsView, unanswered } from './helpers/openai-agents-views.js'
import { tmpRoot } from './helpers/tmp-root.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'

/** The history view of `events` shows `items` (in order, or as multisets), and answers exactly the calls they leave open. */
function expectViewShows(events: readonly SessionEvent[], items: readonly AgentInputItem[], order: boolean): void {
  const { shown, synthetic } = historyView(events)
  const view = itemsView(items)
  if (order) expect(shown).toEqual(view)
  else expect([...shown].sort()).toEqual([...view].sort())
  expect(synthetic).toEqual(unanswered(items))
}

const add = tool({
  name: 'add',
  description: 'adds',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => String(a + b),
})

const reasoning = (text: string) => ({ type: 'reasoning' as const, content: [{ type: 'input_text' as const, text }] })

/** A tracked run: add 1+2 (call_1), then 3+3 (call_2), then the answer; with `reasons`, reasoning before each call. */
async function trackedRun(session: JsonlSession, reasons: boolean) {
  const think = (text: string) => (reasons ? [reasoning(text)] : [])
  const model = new ScriptedModel([
    [...think('r1'), functionCall('add', { a: 1, b: 2 }, { callId: 'call_1' })],
    [...think('r2'), functionCall('add', { a: 3, b: 3 }, { callId: 'call_2' })],
    [assistantMessage('It is 3, then 6.')],
  ])
  const agent = new Agent({ name: 'Calc', instructions: 'Add.', model, tools: [add] })
  const untrack = trackToolCalls(agent, session)
  try {
    await run(agent, 'Add 1 and 2, then double it.', { session })
  } finally {
    untrack()
  }
}

async function logFile(root: string): Promise<string> {
  for (const dir of await readdir(root)) {
    if (dir.startsWith('.')) continue
    for (const name of await readdir(join(root, dir))) if (name.endsWith('.jsonl')) return join(root, dir, name)
  }
  throw new Error('no log')
}

interface Scenario {
  name: string
  /** What is written before the pop whose append is torn. */
  setup: (session: JsonlSession) => Promise<void>
  /** Compare the history view in order (false: as multisets; reasoning shows after the tracked call and result before it). */
  order: boolean
  /** Lines the pop's append has at least. */
  lines: number
}

const scenarios: Scenario[] = [
  {
    // Popping the last result: the input, both calls and the first result placed again (no turn).
    name: 'placements pointing back',
    setup: async (s) => {
      await trackedRun(s, false)
      await s.popItem() // the answer: a rewind alone
    },
    order: true,
    lines: 5,
  },
  {
    // The reasoning the run wrote between its tracked calls goes with the rewind: written again, in a turn of its own.
    name: 'items written again in a turn of their own',
    setup: async (s) => {
      await trackedRun(s, true)
      await s.popItem()
    },
    order: false,
    lines: 8,
  },
  {
    // Popping a result the compaction kept undoes it: recorded again, last.
    name: 'a compaction undone, recorded again',
    setup: async (s) => {
      await s.addItems([
        { type: 'message', role: 'user', content: 'Hello.' },
        { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hi.' }] },
      ])
      await trackedRun(s, false)
      await s.popItem()
      await s.compact({ summary: 'S', keepItems: 3 })
    },
    order: true,
    lines: 3,
  },
]

describe('popItem whose append a crash tore (JSONL): every item acknowledged before it stays', () => {
  for (const scenario of scenarios) {
    it(`${scenario.name}: cut at every line boundary and inside every line, the rest gone or zeroed`, async () => {
      const root = await tmpRoot()
      const open = () => createJsonlPersistence({ root, sync: 'none' })
      const id = 'torn-pop'
      const first = new JsonlSession({ persistence: open(), sessionId: id })
      await scenario.setup(first)
      await first.close()
      const file = await logFile(root)
      const popper = new JsonlSession({ persistence: open(), sessionId: id })
      const pre = await popper.getItems()
      const before = await readFile(file)
      expect(await popper.popItem()).toEqual(pre.at(-1))
      await popper.close()
      const whole = await readFile(file)
      const batch = whole.subarray(before.length)
      const ends: number[] = []
      for (let i = 0; i < batch.length; i++) if (batch[i] === 0x0a) ends.push(i + 1)
      expect(ends.length).toBeGreaterThanOrEqual(scenario.lines)
      const cuts = new Set<number>([0])
      let start = 0
      for (const end of ends) {
        cuts.add(Math.floor((start + end) / 2))
        cuts.add(end)
        start = end
      }
      const rewindLanded = ends[0]!
      for (const cut of [...cuts].sort((a, b) => a - b)) {
        for (const zeroed of [false, true]) {
          const at = `cut at byte ${cut} of ${batch.length}${zeroed ? ', the rest zeroed' : ''}`
          const rest = zeroed ? Buffer.alloc(batch.length - cut) : Buffer.alloc(0)
          await writeFile(file, Buffer.concat([before, batch.subarray(0, cut), rest]))
          // The pop never returned: either it did not happen (its rewind did not land) or it is completed.
          const expected = cut >= rewindLanded ? pre.slice(0, -1) : pre
          const store = open()
          const session = new JsonlSession({ persistence: store, sessionId: id })
          const items = await session.getItems()
          expect(itemsView(items), at).toEqual(itemsView(expected))
          expect(items, at).toEqual(expected)
          expectViewShows((await store.read(id)).events, items, scenario.order)
          await session.close()
          // A fresh store's load (the resume path other adapters and the CLI take) shows the same.
          const reader = open()
          expectViewShows((await reader.load(id)).events, items, scenario.order)
          await reader.close(id)
          // And the session goes on: a pop, then an add.
          const store2 = open()
          const again = new JsonlSession({ persistence: store2, sessionId: id })
          expect(await again.popItem(), at).toEqual(items.at(-1))
          const next: AgentInputItem = { type: 'message', role: 'user', content: 'Next.' }
          await again.addItems([next])
          const after = await again.getItems()
          expect(after, at).toEqual([...items.slice(0, -1), next])
          expectViewShows((await store2.read(id)).events, after, scenario.order)
          await again.close()
        }
      }
    })
  }
})

// The same on the crash-modelling file system (src/testing/crash-fs.ts): every state a power cut
// at every change to the disk during the pop's append may leave (sync: 'data'), recovered; and for
// each one whose recovery completes the pop, every state a power cut during that completion leaves.
describe('popItem on a crash-modelled disk: every crash state of its append, and of the completion', () => {
  const ROOT = '/sessions'
  const id = 'crash-pop'
  const seen = new Set<string>()
  /** Each state once (a crash point's states repeat the earlier points' that nothing changed). */
  const addDistinct = (into: CrashImage[], found: readonly CrashImage[]) => {
    for (const image of found) {
      if (seen.has(image.key)) continue
      seen.add(image.key)
      into.push(image)
    }
  }

  /** The items a session opened on `image` shows, the history view (a load) checked against them; the crash states its own writes pass through, if asked. */
  async function recover(image: CrashImage, order: boolean, collect?: CrashImage[]): Promise<AgentInputItem[]> {
    const fs = createCrashFileSystem(image)
    if (collect) fs.onMutation = () => addDistinct(collect, fs.crashImages({ maxImages: 64 }))
    const session = new JsonlSession({ persistence: createJsonlPersistence({ root: ROOT, fs }), sessionId: id })
    const items = await session.getItems()
    fs.onMutation = undefined
    await session.close()
    const reader = createJsonlPersistence({ root: ROOT, fs })
    expectViewShows((await reader.load(id)).events, items, order)
    await reader.close(id)
    return items
  }

  for (const scenario of scenarios) {
    it(`${scenario.name}`, async () => {
      const fs = createCrashFileSystem()
      const open = () => createJsonlPersistence({ root: ROOT, fs })
      const first = new JsonlSession({ persistence: open(), sessionId: id })
      await scenario.setup(first)
      await first.close()
      const popper = new JsonlSession({ persistence: open(), sessionId: id })
      const pre = await popper.getItems()
      const images: CrashImage[] = []
      fs.onMutation = () => addDistinct(images, fs.crashImages({ maxImages: 64 }))
      await popper.popItem()
      fs.onMutation = undefined
      await popper.close()
      const popped = pre.slice(0, -1)
      let completed = 0
      const nested: { images: CrashImage[]; items: AgentInputItem[] }[] = []
      for (const image of images) {
        const during: CrashImage[] = []
        const items = await recover(image, scenario.order, during)
        // Either the pop did not happen (its rewind was lost) or it is whole.
        if (items.length === popped.length) {
          expect(items).toEqual(popped)
          if (during.length > 0) {
            completed++
            nested.push({ images: during, items })
          }
        } else expect(items).toEqual(pre)
      }
      // A crash while a recovery writes (its load's repair, the pop's completion), for the
      // recovery that writes the most: the next open shows the same items.
      const most = nested.reduce((a, b) => (b.images.length > a.images.length ? b : a))
      for (const again of most.images) expect(itemsView(await recover(again, scenario.order))).toEqual(itemsView(most.items))
      expect(completed).toBeGreaterThan(0)
      expect(images.length).toBeGreaterThan(scenario.lines)
    })
  }
})
