import { afterEach, expect, test, vi } from 'vitest'
import {
  EventDroppedError,
  type SessionEvent,
  type SessionMeta,
  type SessionPersistence,
  SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { eventBytes } from '../src/plugin/buffer-budget.js'
import { DrainStalledError } from '../src/plugin/plugin-errors.js'
import { stalledAfterMs } from '../src/plugin/session-drain.js'
import { createMemoryPersistence, createReferenceHost, type ReferenceSession } from '../src/testing/index.js'
import { oneTurn } from './helpers/plugin-setup.js'

// A drain whose backend never answers (a stalled NFS mount, a database that stopped
// answering) neither succeeds nor fails. These tests hold `append` (or `create`) of the
// in-memory backend in flight with explicit gates and move time with fake timers only.

afterEach(() => {
  vi.useRealTimers()
})

type Gated = 'append' | 'create'

/**
 * The in-memory backend, except that `stall(op, id)` makes that operation of that session wait
 * (in flight, never settling) until the returned `release` is called; `started` resolves once
 * a stalled call is in flight.
 */
function stallingBackend() {
  const inner = createMemoryPersistence()
  const gates = new Map<string, { gate: Promise<void>; started: () => void }>()
  const key = (op: Gated, id: string) => `${op}:${id}`
  async function gated<T>(op: Gated, id: string, run: () => Promise<T>): Promise<T> {
    const g = gates.get(key(op, id))
    if (g) {
      g.started()
      await g.gate
    }
    return run()
  }
  const backend: SessionPersistence = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'append') return (id: string, events: readonly SessionEvent[]) => gated('append', id, () => target.append(id, events))
      if (prop === 'create') return (meta: SessionMeta) => gated('create', meta.id, () => target.create(meta))
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return {
    backend,
    stall(op: Gated, id: string): { started: Promise<void>; release: () => void } {
      let release = () => {}
      let started = () => {}
      const startedP = new Promise<void>((resolve) => (started = resolve))
      const gate = new Promise<void>((resolve) => (release = resolve))
      gates.set(key(op, id), { gate, started })
      return {
        started: startedP,
        release: () => {
          gates.delete(key(op, id))
          release()
        },
      }
    },
    stored: async (id: string) => (await inner.inspect(id)).events,
  }
}

async function setup(options: { flushDelayMs: number; maxBufferedBytes: number }) {
  const stalling = stallingBackend()
  const plugin = sessionPersistencePlugin({ persistence: stalling.backend, ...options })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const recovered: string[] = []
  plugin.on('recovered', (id) => recovered.push(id))
  const host = createReferenceHost()
  await plugin.apply(host)
  const drops = () => errors.filter((e): e is EventDroppedError => e instanceof EventDroppedError)
  /** Puts one drain of `session` in flight with an append that never answers, then lets it count as stalled. */
  const stallDrain = async (session: ReferenceSession) => {
    const stalled = stalling.stall('append', session.meta.id)
    session.emit('filler', filler())
    session.flush()
    await stalled.started
    await vi.advanceTimersByTimeAsync(stalledAfterMs(options.flushDelayMs))
    return stalled
  }
  return { ...stalling, plugin, host, errors, recovered, drops, stallDrain }
}

const filler = () => ({ text: 'x'.repeat(400) })
const bytesOf = (events: readonly SessionEvent[]) => events.reduce((n, e) => n + eventBytes(e), 0)

test('an append that never settles: once the drain is stalled, events past maxBufferedBytes are dropped and reported, and what is held stays within the budget', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const t = await setup({ flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const s = t.host.startSession({ id: 'stuck' })
  s.runTurn(oneTurn(1))
  await t.plugin.flush()
  const durable = s.events.length

  const stalled = t.stall('append', 'stuck')
  s.emit('filler', filler())
  s.flush()
  await stalled.started // the drain is in flight, and its append never answers
  s.emit('filler', filler())
  expect(t.errors).toEqual([]) // not stalled yet: the healthy path only buffers
  await vi.advanceTimersByTimeAsync(stalledAfterMs(100))

  const fillers = Array.from({ length: 20 }, () => s.emit('filler', filler()))
  const drops = t.drops()
  const firstDropped = fillers.findIndex((f) => f.seq === drops[0]?.seq)
  expect(firstDropped).toBeGreaterThan(0) // some fitted, the rest were dropped
  expect(drops.map((d) => d.seq)).toEqual(fillers.slice(firstDropped).map((f) => f.seq)) // each drop, once
  for (const d of drops) {
    expect(d.code).toBe('E_IO')
    expect(d.maxBufferedBytes).toBe(3_000)
    expect(d.cause).toBeInstanceOf(DrainStalledError)
    expect((d.cause as DrainStalledError).code).toBe('E_IO')
    expect((d.cause as DrainStalledError).afterMs).toBe(stalledAfterMs(100))
  }
  expect(t.errors.filter((e) => !(e instanceof EventDroppedError))).toEqual([]) // a stall is not a failure
  // Everything the plugin still holds (the batch in flight included) fits the budget.
  const held = s.events.slice(durable, drops[0]!.seq)
  expect(bytesOf(held)).toBeLessThanOrEqual(3_000)
  expect(bytesOf(held) + eventBytes(fillers[firstDropped]!)).toBeGreaterThan(3_000)

  // Still hanging much later: the bound holds however long it hangs.
  await vi.advanceTimersByTimeAsync(60_000)
  const more = Array.from({ length: 5 }, () => s.emit('filler', filler()))
  expect(t.drops().slice(-5).map((d) => d.seq)).toEqual(more.map((e) => e.seq))
  expect(await t.stored('stuck')).toEqual(s.events.slice(0, durable))

  stalled.release()
  expect(await t.plugin.flush('stuck').catch((e: unknown) => e)).toBeInstanceOf(EventDroppedError)
  expect(await t.stored('stuck')).toEqual(s.events.slice(0, drops[0]!.seq)) // what fitted is written, nothing after
  await expect(t.plugin.dispose()).rejects.toBeInstanceOf(AggregateError)
})

test('when the stalled append settles, counting returns to normal: later events are accepted and written, beyond the budget while drains are prompt', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const t = await setup({ flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const s = t.host.startSession({ id: 'slow' })
  s.runTurn(oneTurn(1))
  await t.plugin.flush()

  const stalled = await t.stallDrain(s)
  for (let i = 0; i < 3; i++) s.emit('filler', filler()) // counted, and within the budget
  stalled.release()
  await t.plugin.flush('slow')
  expect(await t.stored('slow')).toEqual(s.events)

  // Healthy again: ten events of 400 bytes (past the 3000-byte budget) buffered at once are not dropped.
  for (let i = 0; i < 10; i++) s.emit('filler', filler())
  await t.plugin.flush('slow')
  expect(await t.stored('slow')).toEqual(s.events)
  expect(t.errors).toEqual([])
  expect(t.recovered).toEqual([]) // nothing failed, so nothing recovered
  await t.plugin.dispose()
})

test('after a drop during a stall, later events of that session are dropped too once the append settles; its written events stop counting against the budget', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const t = await setup({ flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const a = t.host.startSession({ id: 'a' })
  const b = t.host.startSession({ id: 'b' })
  a.runTurn(oneTurn(1))
  b.runTurn(oneTurn(1))
  await t.plugin.flush()

  const stalledA = await t.stallDrain(a)
  for (let i = 0; i < 10; i++) a.emit('filler', filler())
  const firstDrop = t.drops()[0]!.seq
  stalledA.release()
  expect(await t.plugin.flush('a').catch((e: unknown) => e)).toBeInstanceOf(EventDroppedError)
  expect(await t.stored('a')).toEqual(a.events.slice(0, firstDrop))

  // The rule for drops: once one event of a session is dropped, every later one is dropped and reported.
  const late = a.emit('filler', { text: 'late' })
  expect(t.drops().at(-1)).toMatchObject({ seq: late.seq, code: 'E_IO', sessionId: 'a' })
  expect(t.drops().at(-1)!.cause).toBeInstanceOf(DrainStalledError) // still blamed on the stall
  expect(await t.stored('a')).toEqual(a.events.slice(0, firstDrop))

  // a's written events no longer hold the budget: b, stalled now, can buffer nearly all of it.
  const dropsSoFar = t.drops().length
  const stalledB = await t.stallDrain(b)
  for (let i = 0; i < 5; i++) b.emit('filler', filler()) // 6 × ~450 bytes < 3000
  expect(t.drops().length).toBe(dropsSoFar)
  stalledB.release()
  await t.plugin.flush('b')
  expect(await t.stored('b')).toEqual(b.events)

  const err = (await t.plugin.dispose().catch((e: unknown) => e)) as AggregateError
  expect(err).toBeInstanceOf(AggregateError)
  expect(err.errors.map((e: SessionPersistenceError) => e.sessionId)).toEqual(['a']) // b lost nothing
})

test('a drain slower than the threshold is not sized: events buffered meanwhile are kept, whatever their size', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const flushDelayMs = 5_000 // the threshold follows a flush delay longer than its floor
  expect(stalledAfterMs(flushDelayMs)).toBe(flushDelayMs)
  const t = await setup({ flushDelayMs, maxBufferedBytes: 3_000 })
  const s = t.host.startSession({ id: 'slow-ok' })
  s.runTurn(oneTurn(1))
  await t.plugin.flush()

  const stalled = t.stall('append', 'slow-ok')
  s.emit('filler', filler())
  s.flush()
  await stalled.started
  await vi.advanceTimersByTimeAsync(flushDelayMs - 1)
  for (let i = 0; i < 10; i++) s.emit('filler', filler()) // past the budget, but not stalled yet
  expect(t.errors).toEqual([])
  await vi.advanceTimersByTimeAsync(1) // now stalled: the events held are counted, the budget is full
  const next = s.emit('filler', filler())
  expect(t.drops().map((d) => d.seq)).toEqual([next.seq])
  stalled.release()
  await t.plugin.flush('slow-ok').catch(() => {})
  expect(await t.stored('slow-ok')).toEqual(s.events.slice(0, next.seq))
  await t.plugin.dispose().catch(() => {})
})

test('a backend that hangs while the session is being created is bounded the same way', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const t = await setup({ flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const stalled = t.stall('create', 'new')
  const s = t.host.startSession({ id: 'new' })
  await stalled.started // the first drain is adopting the session, and create never answers
  await vi.advanceTimersByTimeAsync(stalledAfterMs(100))
  const fillers = Array.from({ length: 20 }, () => s.emit('filler', filler()))
  const drops = t.drops()
  expect(drops.length).toBeGreaterThan(0)
  expect(drops.length).toBeLessThan(fillers.length)
  expect(drops[0]!.cause).toBeInstanceOf(DrainStalledError)
  expect(bytesOf(s.events.slice(0, drops[0]!.seq))).toBeLessThanOrEqual(3_000)
  stalled.release()
  await t.plugin.flush('new').catch(() => {})
  expect(await t.stored('new')).toEqual(s.events.slice(0, drops[0]!.seq))
  await t.plugin.dispose().catch(() => {})
})

test('one stalled session does not hold up or size a healthy one', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const t = await setup({ flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const stuck = t.host.startSession({ id: 'stuck' })
  const fine = t.host.startSession({ id: 'fine' })
  stuck.runTurn(oneTurn(1))
  fine.runTurn(oneTurn(1))
  await t.plugin.flush()

  const stalled = await t.stallDrain(stuck)
  for (let i = 0; i < 10; i++) stuck.emit('filler', filler()) // fills the budget: drops
  const stuckDrops = t.drops().length
  expect(stuckDrops).toBeGreaterThan(0)

  // The budget is exhausted, yet the healthy session buffers and writes past it, unsized.
  for (let i = 0; i < 10; i++) fine.emit('filler', filler())
  await t.plugin.flush('fine')
  expect(await t.stored('fine')).toEqual(fine.events)
  expect(t.drops().length).toBe(stuckDrops)
  expect(t.drops().every((d) => d.sessionId === 'stuck')).toBe(true)

  stalled.release()
  await t.plugin.flush('stuck').catch(() => {})
  const err = (await t.plugin.dispose().catch((e: unknown) => e)) as AggregateError
  expect(err.errors.map((e: SessionPersistenceError) => e.sessionId)).toEqual(['stuck'])
})
