import { describe, expect, test } from 'vitest'
import {
  createJsonlPersistence,
  type SessionEvent,
  type SessionMeta,
  type SessionPersistence,
  type SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { MemoryStore } from '../src/memory/memory-persistence.js'
import { createMemoryPersistence, createReferenceHost, type ReferenceHost } from '../src/testing/index.js'
import { oneTurn } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

// SPEC 8 (v0.3) and 15.1: a session resumed with load(id, { from: 'last-compaction' }) is
// created with a seed that holds only the events from firstSeq on; the plugin continues at
// firstSeq + seed.length, appends nothing twice, and a seed that does not cover the log from
// firstSeq on is a collision.

type Backend = { name: string; make: () => Promise<() => SessionPersistence> }
const backends: Backend[] = [
  {
    name: 'in-memory',
    make: async () => {
      const store = new MemoryStore()
      return () => createMemoryPersistence({ store })
    },
  },
  {
    name: 'JSONL',
    make: async () => {
      const root = await tmpRoot()
      return () => createJsonlPersistence({ root })
    },
  },
]

/** `inner`, recording the seqs of every append that succeeded. */
function recording(inner: SessionPersistence) {
  const appended: number[] = []
  const backend: SessionPersistence = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'append') {
        return async (id: string, events: readonly SessionEvent[]) => {
          await target.append(id, events)
          appended.push(...events.map((e) => e.seq))
        }
      }
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return { backend, appended }
}

async function pluginOver(persistence: SessionPersistence, host: ReferenceHost = createReferenceHost({ cwd: '/project' }), flushDelayMs = 10_000) {
  const rec = recording(persistence)
  const plugin = sessionPersistencePlugin({ persistence: rec.backend, flushDelayMs })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  await plugin.apply(host)
  return { plugin, host, errors, appended: rec.appended }
}

/** Three turns, a compaction keeping the third, then the session disposed: a log whose tail starts late. */
async function compactedLog(open: () => SessionPersistence, id: string): Promise<readonly SessionEvent[]> {
  const { plugin, host } = await pluginOver(open())
  const s = host.startSession({ id })
  s.runTurn(oneTurn(1))
  s.runTurn(oneTurn(2))
  const thirdStart = s.events.length
  s.runTurn(oneTurn(3))
  s.emit('history/compact', { summary: 'turns 1 and 2 in short', firstKeptSeq: thirdStart })
  await plugin.flush(id)
  const events = s.events.slice()
  await plugin.dispose()
  return events
}

const fullLog = async (open: () => SessionPersistence, id: string) => (await open().read(id)).events

for (const { name, make } of backends) {
  describe(`seeding from a tail (${name})`, () => {
    test('resumed through plugin.persistence.load from the last compaction: new events at firstSeq + seed.length, nothing twice', async () => {
      const open = await make()
      const before = await compactedLog(open, 'tail')
      const { plugin, host, errors, appended } = await pluginOver(open())
      const loaded = await plugin.persistence.load('tail', { from: 'last-compaction' })
      expect(loaded.firstSeq).toBeGreaterThan(0)
      expect(loaded.firstSeq + loaded.events.length).toBe(before.length)
      const s = host.resume(loaded)
      expect(s.firstSeq).toBe(loaded.firstSeq)
      s.runTurn(oneTurn(4))
      await plugin.flush('tail')
      const after = await fullLog(open, 'tail')
      expect(after.slice(0, before.length)).toEqual(before)
      expect(after.slice(before.length)).toEqual(s.events.slice(loaded.events.length))
      expect(after.map((e) => e.seq)).toEqual(after.map((_, i) => i))
      // Only the new turn was appended, each event once.
      expect(appended).toEqual(after.slice(before.length).map((e) => e.seq))
      expect(errors).toEqual([])
      await plugin.dispose()
    })

    test('a tail the plugin adopts itself (loaded elsewhere, e.g. before a restart): it reads the log from firstSeq on and appends only what is new', async () => {
      const open = await make()
      const before = await compactedLog(open, 'restart')
      const elsewhere = open()
      const loaded = await elsewhere.load('restart', { from: 'last-compaction' })
      await elsewhere.close('restart')
      expect(loaded.firstSeq).toBeGreaterThan(0)
      const { plugin, host, errors, appended } = await pluginOver(open())
      const s = host.resume(loaded)
      s.runTurn(oneTurn(4))
      await plugin.flush('restart')
      const after = await fullLog(open, 'restart')
      expect(after).toEqual(JSON.parse(JSON.stringify([...before, ...s.events.slice(loaded.events.length)])))
      expect(appended).toEqual(after.slice(before.length).map((e) => e.seq))
      expect(errors).toEqual([])
      await plugin.dispose()
    })

    test('a live tail seeded at apply (a reload): only the events past what is stored are appended', async () => {
      const open = await make()
      const before = await compactedLog(open, 'reload')
      const elsewhere = open()
      const loaded = await elsewhere.load('reload', { from: 'last-compaction' })
      await elsewhere.close('reload')
      const host = createReferenceHost({ cwd: '/project' })
      const s = host.resume(loaded) // no plugin listening yet
      s.runTurn(oneTurn(4))
      const { plugin, errors, appended } = await pluginOver(open(), host)
      await plugin.flush('reload')
      const after = await fullLog(open, 'reload')
      expect(after.slice(before.length)).toEqual(JSON.parse(JSON.stringify(s.events.slice(loaded.events.length))))
      expect(appended).toEqual(after.slice(before.length).map((e) => e.seq))
      expect(errors).toEqual([])
      await plugin.dispose()
    })

    test('a seed whose events from firstSeq on differ from the stored ones is a collision: E_EXISTS, nothing written', async () => {
      const open = await make()
      const before = await compactedLog(open, 'other')
      const { plugin, host, errors, appended } = await pluginOver(open())
      const firstSeq = 4
      const foreign: SessionEvent[] = before.slice(firstSeq).map((e) => (e.type === 'user/message' ? { ...e, data: { content: 'someone else' } } : e))
      host.sessionEvents.emit('session/created', before0Meta('other'), foreign, { firstSeq })
      const err = await plugin.flush('other').then(() => undefined, (e: SessionPersistenceError) => e)
      expect(err?.code).toBe('E_EXISTS')
      expect(errors.map((e) => e.code)).toEqual(['E_EXISTS'])
      expect(appended).toEqual([])
      expect(await fullLog(open, 'other')).toEqual(before)
      await plugin.dispose()
    })

    test('a firstSeq past the end of the stored log is a collision too', async () => {
      const open = await make()
      const before = await compactedLog(open, 'short')
      const { plugin, host, errors, appended } = await pluginOver(open())
      const seq = before.length + 3
      host.sessionEvents.emit('session/created', before0Meta('short'), [{ seq, type: 'user/message', time: 1, data: { content: 'x' } }], { firstSeq: seq })
      expect((await plugin.flush('short').catch((e: SessionPersistenceError) => e))?.code).toBe('E_EXISTS')
      expect(errors.map((e) => e.code)).toEqual(['E_EXISTS'])
      expect(appended).toEqual([])
      expect(await fullLog(open, 'short')).toEqual(before)
      await plugin.dispose()
    })

    test('a tail seed with no stored log: E_NOT_FOUND reported, nothing created', async () => {
      const open = await make()
      const { plugin, host, errors, appended } = await pluginOver(open())
      host.sessionEvents.emit('session/created', before0Meta('ghost'), [{ seq: 5, type: 'user/message', time: 1, data: { content: 'x' } }], { firstSeq: 5 })
      expect((await plugin.flush('ghost').catch((e: SessionPersistenceError) => e))?.code).toBe('E_NOT_FOUND')
      expect(errors.map((e) => e.code)).toEqual(['E_NOT_FOUND'])
      expect(appended).toEqual([])
      expect((await open().read('ghost').catch((e: SessionPersistenceError) => e)) as SessionPersistenceError).toMatchObject({ code: 'E_NOT_FOUND' })
      // Unlike a collision, the host's events were lost: dispose names the session.
      const disposed = await plugin.dispose().catch((e: AggregateError) => e)
      expect((disposed as AggregateError).errors.map((e: SessionPersistenceError) => `${e.sessionId}:${e.code}`)).toEqual(['ghost:E_NOT_FOUND'])
    })
  })
}

describe('a tail seed while another instance holds the lock (in-memory)', () => {
  test('a seed that does not continue the log is a collision at once, read without the lock', async () => {
    const store = new MemoryStore()
    const open = () => createMemoryPersistence({ store })
    const before = await compactedLog(open, 'held')
    const holder = open()
    const loaded = await holder.load('held', { from: 'last-compaction' })
    const { plugin, host, errors, appended } = await pluginOver(open())
    const foreign = loaded.events.map((e) => (e.type === 'user/message' ? { ...e, data: { content: 'not this one' } } : e))
    host.sessionEvents.emit('session/created', loaded.meta, foreign, { firstSeq: loaded.firstSeq })
    expect((await plugin.flush('held').catch((e: SessionPersistenceError) => e))?.code).toBe('E_EXISTS')
    expect(errors.map((e) => e.code)).toEqual(['E_EXISTS'])
    expect(appended).toEqual([])
    expect(await fullLog(open, 'held')).toEqual(before)
    await holder.closeAll()
    await plugin.dispose()
  })

  test('a seed that continues it waits for the lock (E_LOCKED, retried), then appends only what is new', async () => {
    const store = new MemoryStore()
    const open = () => createMemoryPersistence({ store })
    const before = await compactedLog(open, 'wait')
    const holder = open()
    const loaded = await holder.load('wait', { from: 'last-compaction' })
    const { plugin, host, errors, appended } = await pluginOver(open(), undefined, 20)
    const s = host.resume(loaded)
    s.runTurn(oneTurn(4))
    expect((await plugin.flush('wait').catch((e: SessionPersistenceError) => e))?.code).toBe('E_LOCKED')
    await holder.closeAll()
    await expect.poll(async () => (await fullLog(open, 'wait')).length, { timeout: 5_000 }).toBe(before.length + s.events.length - loaded.events.length)
    await plugin.flush('wait')
    expect(appended).toEqual(s.events.slice(loaded.events.length).map((e) => e.seq))
    expect(errors.map((e) => e.code)).toEqual(['E_LOCKED'])
    await plugin.dispose()
  })
})

function before0Meta(id: string): SessionMeta {
  return { id, createdAt: 1_700_000_000_000, delegationDepth: 0, cwd: '/project' }
}

describe('bad firstSeq is refused like a bad meta', () => {
  test.each([
    ['negative', -1, 0],
    ['fractional', 1.5, 0],
    ['NaN', Number.NaN, 0],
    ['a string', '2', 0],
    ['seed seqs that do not start at firstSeq', 2, 3],
  ])('%s: E_INVALID_META reported, the session is not tracked, nothing written', async (_name, firstSeq, seedStart) => {
    const store = new MemoryStore()
    const { plugin, host, errors, appended } = await pluginOver(createMemoryPersistence({ store }))
    const seed: SessionEvent[] = [{ seq: seedStart, type: 'user/message', time: 1, data: { content: 'x' } }]
    host.sessionEvents.emit('session/created', before0Meta('bad'), seed, { firstSeq } as unknown as { firstSeq: number })
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_META'])
    expect(errors[0]?.sessionId).toBe('bad')
    expect((await plugin.flush('bad').catch((e: SessionPersistenceError) => e))?.code).toBe('E_NOT_FOUND')
    expect(appended).toEqual([])
    expect(store.sessions.has('bad')).toBe(false)
    await plugin.dispose()
  })

  test('seed options that are not an object are refused too; { } and { firstSeq: 0 } are a seed from the start', async () => {
    const store = new MemoryStore()
    const { plugin, host, errors } = await pluginOver(createMemoryPersistence({ store }))
    host.sessionEvents.emit('session/created', before0Meta('weird'), [], 7 as unknown as { firstSeq: number })
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_META'])
    const first: SessionEvent[] = [{ seq: 0, type: 'user/message', time: 1, data: { content: 'x' } }]
    host.sessionEvents.emit('session/created', before0Meta('empty-options'), first, {})
    host.sessionEvents.emit('session/created', before0Meta('zero'), first, { firstSeq: 0 })
    await plugin.flush()
    expect(store.sessions.get('empty-options')?.lines).toHaveLength(1)
    expect(store.sessions.get('zero')?.lines).toHaveLength(1)
    expect(errors).toHaveLength(1)
    await plugin.dispose()
  })
})

describe('the reference host resumes from a tail', () => {
  test('resume(loaded) continues the seqs at loaded.firstSeq + events.length, and refuses a fork it has no seed for', async () => {
    const host = createReferenceHost()
    const created: unknown[][] = []
    host.sessionEvents.on('session/created', (...args) => created.push(args))
    const meta = before0Meta('ref')
    const tail: SessionEvent[] = [
      { seq: 10, type: 'turn/start', time: 1, data: { turn: 3 } },
      { seq: 11, type: 'user/message', time: 1, data: { content: 'q' } },
    ]
    const s = host.resume({ meta, events: tail, firstSeq: 10 })
    expect(created[0]?.[2]).toEqual({ firstSeq: 10 })
    expect(s.emit('assistant/message', { turn: 3, step: 0, content: [] }).seq).toBe(12)
    expect(s.turn).toBe(3)
    expect([...host.liveSessions()][0]).toMatchObject({ firstSeq: 10 })
    expect(() => host.fork(s, { seedLength: 4 })).toThrow(/from seq 10/)
    const fromStart = host.resume({ meta: before0Meta('ref0'), events: [], firstSeq: 0 })
    expect(created[1]).toHaveLength(2) // no third argument for a seed from the start
    expect(fromStart.emit('turn/start', { turn: 1 }).seq).toBe(0)
  })
})
