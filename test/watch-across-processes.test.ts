import { type ChildProcess, spawn } from 'node:child_process'
import { appendFile, open, readFile } from 'node:fs/promises'
import { createInterface } from 'node:readline'
import { expect, test, vi } from 'vitest'
import { createJsonlPersistence, INTERRUPTED_TOOL_TEXT, type SessionEvent } from '../src/index.js'
import { ev, meta } from './helpers/events.js'
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

// §15.3: a watch ends when its session is deleted, and a session re-created under the same id
// is another session: none of its events is yielded as if the first had gone on.
const base = [ev(0, 'turn/start', { turn: 0 }), ev(1, 'user/message', { content: 'OLD' }), ev(2, 'turn/end', { turn: 0, reason: { kind: 'completed' } })]
const newer = [...base.map((e) => ({ ...e, data: { ...(e.data as object), content: 'NEW' } })), ev(3, 'turn/start', { turn: 1 }), ev(4, 'user/message', { content: 'NEW 2' })]

test('delete ends a watch at once (not only by the safety poll), so a session re-created later under the id is never yielded', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('chat'))
  await p.append('chat', base)
  await p.close('chat')
  // No safety poll (its timer is a fake one that never fires): only the delete's notification
  // can end the watch.
  const realTimeout = globalThis.setTimeout
  const pause = () => new Promise((r) => realTimeout(r, 10))
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  let ended: string | undefined
  try {
    const w = follow(p.watch('chat'))
    void w.ended.then((e) => (ended = e))
    for (let i = 0; i < 1000 && w.seen.length < 3; i++) await pause()
    expect(w.seen).toEqual(base)
    await p.delete('chat')
    for (let i = 0; i < 1000 && ended === undefined; i++) await pause()
    expect(ended).toBe('ended')
    await p.create(meta('chat')) // the same meta: only the delete tells the two apart
    await p.append('chat', newer)
    expect(w.seen).toEqual(base)
  } finally {
    vi.useRealTimers()
  }
}, 30_000)

test('a session deleted and re-created under the id with no pause between: the watch ends and yields nothing of the new one', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('chat'))
  await p.append('chat', base)
  await p.close('chat')
  const w = follow(p.watch('chat'))
  await until(() => w.seen.length === 3, 'the stored events')
  await p.delete('chat')
  await p.create(meta('chat', { createdAt: 1_800_000_000_000 }))
  await p.append('chat', newer)
  expect(await within(w.ended)).toBe('ended')
  expect(w.seen).toEqual(base)
})

test('migrate of a watched version-0 session does not end the watch: the events appended after it follow', async () => {
  const root = await tmpRoot()
  const old = createJsonlPersistence({ root, formatVersion: 0, sync: 'none' })
  await old.create(meta('m', { cwd: '/proj', tag: 'x' }))
  await old.append('m', base)
  await old.close('m')
  const w = follow(old.watch('m'))
  await until(() => w.seen.length === 3, 'the stored events')
  const p = createJsonlPersistence({ root, sync: 'none' })
  expect(await p.migrate('m')).toMatchObject({ fromVersion: 0, migrated: true })
  const more = [ev(3, 'turn/start', { turn: 1 }), ev(4, 'user/message', { content: 'after' })]
  expect((await p.load('m')).meta).toEqual(meta('m', { cwd: '/proj', tag: 'x' }))
  await p.append('m', more)
  await until(() => w.seen.length === 5, 'the events after the migrate')
  expect(w.seen).toEqual([...base, ...more])
  await p.close('m')
  await p.delete('m')
  expect(await within(w.ended)).toBe('ended')
})

// §6.2: a line of invalid UTF-8 is a defect a load cuts; a watch never yields it, and goes on
// with what the repair writes there.
test('version 0: a last line of invalid UTF-8 is not yielded; after the repairing load the closers and later appends are', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 0, sync: 'none' })
  await p.create(meta('u'))
  await p.append('u', [ev(0, 'turn/start', { turn: 0 }), ev(1, 'user/message', { content: 'hi' })])
  await p.close('u')
  const path = p.locate(meta('u')).path
  await appendFile(path, Buffer.concat([Buffer.from('{"seq":2,"type":"user/message","time":3,"data":{"content":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}\n')]))
  const w = follow(p.watch('u'))
  await until(() => w.seen.length >= 2, 'the valid events')
  expect((await p.read('u')).events).toHaveLength(2)
  const loaded = await p.load('u')
  expect(loaded.repair?.reason).toBe('invalid UTF-8')
  expect(loaded.repair?.closers.map((e) => e.type)).toEqual(['turn/end'])
  await p.append('u', [ev(3, 'turn/start', { turn: 1 })])
  await p.close('u')
  await until(() => w.seen.length >= 4, 'the closer and the append')
  expect(w.seen).toEqual((await p.read('u')).events)
  expect(w.seen.map((e) => e.seq)).toEqual([0, 1, 2, 3])
  await p.delete('u')
  expect(await within(w.ended)).toBe('ended')
})

test('bytes under the watcher rewritten in place (lines at other offsets): it finds its seq again and goes on', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 0, sync: 'none' })
  const events = Array.from({ length: 6 }, (_, n) => ev(n, 'x/tick', { n }))
  await p.create(meta('r'))
  await p.append('r', events.slice(0, 5))
  await p.close('r')
  const path = p.locate(meta('r')).path
  const w = follow(p.watch('r'))
  await until(() => w.seen.length === 5, 'the stored events')
  // The same events with longer lines (a key order of another tool), and one more: where the
  // watcher stopped now lies inside a line. One write, in place: the inode stays.
  const [header] = (await readFile(path, 'utf8')).split('\n')
  const line = (e: SessionEvent) => JSON.stringify({ data: e.data, time: e.time, type: e.type, seq: e.seq, pad: 'p'.repeat(40) })
  const handle = await open(path, 'r+')
  await handle.write(`${header}\n${events.map(line).join('\n')}\n`, 0)
  await handle.close()
  await until(() => w.seen.length === 6, 'the appended event')
  expect(w.seen.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
  expect(w.seen[5]).toMatchObject({ seq: 5, type: 'x/tick', data: { n: 5 } })
  await p.delete('r')
  expect(await within(w.ended)).toBe('ended')
})
