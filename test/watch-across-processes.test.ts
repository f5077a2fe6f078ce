import { type ChildProcess, spawn } from 'node:child_process'
import { appendFile } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import { expect, test } from 'vitest'
import { createJsonlPersistence, INTERRUPTED_TOOL_TEXT, type SessionEvent } from '../src/index.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.3 across processes: a writer process appends while watchers in this process follow it.
const FIXTURE = new URL('./fixtures/appender.mjs', import.meta.url).pathname
const eventAt = (n: number): SessionEvent => ({ seq: n, type: 'x/tick', time: 1000 + n, data: { n, pad: 'p'.repeat(n % 97) } })

function appender(root: string, id: string, args: string[]): { child: ChildProcess; stage: () => Promise<Record<string, unknown>>; exited: Promise<unknown> } {
  const child = spawn(process.execPath, [FIXTURE, root, id, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  // Listened for from the start: a child that has already exited emits nothing later.
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  return { child, stage: async () => JSON.parse((await lines.next()).value as string) as Record<string, unknown>, exited }
}

/** Collects a watch into an array as it goes; `ended` settles when the iteration ends. */
function follow(iterable: AsyncIterable<SessionEvent>): { seen: SessionEvent[]; ended: Promise<'ended'> } {
  const seen: SessionEvent[] = []
  const ended = (async () => {
    for await (const e of iterable) seen.push(e)
    return 'ended' as const
  })()
  return { seen, ended }
}

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

const within = <T>(p: Promise<T>, ms = 10_000) => Promise.race([p, new Promise<'still running'>((r) => setTimeout(() => r('still running'), ms))])

test('two watchers, one from 0 and one from the middle, each see every event of a writer process once, in order', async () => {
  const root = await tmpRoot()
  const watcher = createJsonlPersistence({ root })
  const stop = new AbortController()
  // started before the session exists: the first watcher gets all of it
  const fromStart = follow(watcher.watch('w', { signal: stop.signal }))
  const fromMiddle = follow(watcher.watch('w', { fromSeq: 500, signal: stop.signal }))
  const { stage, exited } = appender(root, 'w', ['100', '10', '3'])
  expect(await stage()).toEqual({ stage: 'first-batch' })
  expect(await stage()).toEqual({ stage: 'done', length: 1000 })
  await until(() => fromStart.seen.length >= 1000 && fromMiddle.seen.length >= 500, 'both watchers')
  expect(fromStart.seen).toEqual(Array.from({ length: 1000 }, (_, n) => eventAt(n)))
  expect(fromMiddle.seen).toEqual(Array.from({ length: 500 }, (_, n) => eventAt(500 + n)))
  stop.abort()
  expect(await within(fromStart.ended)).toBe('ended')
  expect(await within(fromMiddle.ended)).toBe('ended')
  await exited
}, 60_000)

test('a writer killed mid-turn, a torn line, then a repair: watchers skip the torn line and go on with the closers; delete ends them', async () => {
  const root = await tmpRoot()
  const { child, stage, exited } = appender(root, 'k', ['5', '10', '0', 'open-turn'])
  expect(await stage()).toEqual({ stage: 'first-batch' })
  expect(await stage()).toEqual({ stage: 'open', next: 52 })
  const watcher = createJsonlPersistence({ root })
  const a = follow(watcher.watch('k'))
  const b = follow(watcher.watch('k', { fromSeq: 49 }))
  await until(() => a.seen.length >= 52 && b.seen.length >= 3, 'the open turn')
  child.kill('SIGKILL')
  await exited
  // what a kill in the middle of a write leaves: a line without its newline
  const path = watcher.locate({ id: 'k', createdAt: 1000, delegationDepth: 0 }).path
  await appendFile(path, '{"seq":52,"type":"assistant/chunk","time":1,"data":{"chunk":"par')
  await new Promise((r) => setTimeout(r, 200))
  expect(a.seen).toHaveLength(52) // the torn line is never yielded
  const repairer = createJsonlPersistence({ root })
  const loaded = await repairer.load('k')
  expect(loaded.repair?.closers.map((c) => c.type)).toEqual(['tool/result', 'turn/end'])
  await repairer.close('k')
  await until(() => a.seen.length >= 54 && b.seen.length >= 5, 'the closers')
  expect(a.seen.slice(52)).toEqual(loaded.repair?.closers)
  expect(b.seen.map((e) => e.seq)).toEqual([49, 50, 51, 52, 53])
  expect((a.seen[52]!.data as { content: { text: string }[] }).content[0]!.text).toBe(INTERRUPTED_TOOL_TEXT)
  await repairer.delete('k')
  expect(await within(a.ended)).toBe('ended')
  expect(await within(b.ended)).toBe('ended')
  expect(a.seen).toHaveLength(54)
}, 60_000)

test('an aborted signal ends a watch that is waiting, and an already aborted one yields nothing', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  const stop = new AbortController()
  const w = follow(p.watch('never', { signal: stop.signal }))
  await new Promise((r) => setTimeout(r, 100))
  stop.abort()
  expect(await within(w.ended, 5_000)).toBe('ended')
  const late = follow(p.watch('never', { signal: AbortSignal.abort() }))
  expect(await within(late.ended, 5_000)).toBe('ended')
  expect(late.seen).toEqual([])
})
