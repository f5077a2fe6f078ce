import { afterEach, describe, expect, test, vi } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, jsonlPath, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence, createReferenceHost, MUTATING_OPS } from '../src/testing/index.js'
import { oneTurn, pluginSetup } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

// The flush delay and retries run on faked timeouts; drains and I/O run for real, and the tests
// wait for backend calls (explicit synchronization), never for time to pass.
const fakeTimeouts = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
afterEach(() => {
  vi.useRealTimers()
})

describe('plugin write path', () => {
  test('a new session is created lazily and every event is durable after flush, in seq order, exactly once', async () => {
    const { plugin, host, stored } = await pluginSetup()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    s.runTurn(oneTurn(2))
    await plugin.flush(s.meta.id)
    expect(await stored(s.meta.id)).toEqual(s.events)
    expect(s.events.some((e) => e.type === 'assistant/chunk')).toBe(true)
    await plugin.dispose()
  })

  test('the session/event and session/created handlers do no file-system work on the host call path', async () => {
    const { plugin, host, fs } = await pluginSetup()
    const before = fs.calls.length
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    s.emit('after/turn-end', { same: 'tick' })
    expect(fs.calls.length).toBe(before)
    await plugin.flush()
    expect(fs.calls.length).toBeGreaterThan(before)
    await plugin.dispose()
  })

  test('a turn/end drains at once; other events at most flushDelayMs later', async () => {
    fakeTimeouts()
    const { plugin, host, stored, scripted } = await pluginSetup({ flushDelayMs: 30 })
    const s = host.startSession()
    let written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    s.runTurn(oneTurn(1))
    await written // no time passed: the turn/end drained by itself
    expect(await stored(s.meta.id)).toEqual(s.events)
    expect(vi.getTimerCount()).toBe(0)
    s.beginTurn('still typing')
    expect(vi.getTimerCount()).toBe(1) // the flush delay, and nothing else
    const appends = scripted.calls.filter((c) => c.op === 'append').length
    await vi.advanceTimersByTimeAsync(29)
    expect(vi.getTimerCount()).toBe(1)
    expect(scripted.calls.filter((c) => c.op === 'append').length).toBe(appends)
    written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(1)
    await written
    expect(await stored(s.meta.id)).toEqual(s.events)
    await plugin.dispose()
  })

  test('session/flush requests a drain', async () => {
    const { plugin, host, stored, scripted } = await pluginSetup()
    const s = host.startSession()
    s.beginTurn('hi')
    const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    s.flush()
    await written
    expect(await stored(s.meta.id)).toEqual(s.events)
    await plugin.dispose()
  })

  test('a turn/end followed by more events in the same tick: all written, in order', async () => {
    const { plugin, host, stored } = await pluginSetup()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    s.beginTurn('next')
    s.step({ text: 'more' })
    await plugin.flush()
    expect(await stored(s.meta.id)).toEqual(s.events)
    await plugin.dispose()
  })

  test('events for a session before its session/created are reported (E_NOT_FOUND) and not written', async () => {
    const { plugin, host, errors, root } = await pluginSetup()
    host.sessionEvents.emit('session/event', 'early', { seq: 0, type: 'turn/start', time: 1 })
    expect(errors.map((e) => e.code)).toEqual(['E_NOT_FOUND'])
    await plugin.flush()
    expect(await createJsonlPersistence({ root }).list()).toEqual([])
    await plugin.dispose()
  })

  test('a seq gap stops writing that session, is reported, and every flush rejects until re-created', async () => {
    const { plugin, host, errors, stored } = await pluginSetup()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    const good = s.events.length
    host.sessionEvents.emit('session/event', s.meta.id, { seq: good + 5, type: 'x', time: 1 })
    s.emit('later') // seq `good`: the log and the host diverged, nothing more is written
    expect(errors.map((e) => e.code)).toEqual(['E_SEQ_NOT_CONTIGUOUS'])
    for (let i = 0; i < 2; i++) {
      const err = await plugin.flush(s.meta.id).catch((e) => e)
      expect(isSessionPersistenceError(err, 'E_SEQ_NOT_CONTIGUOUS')).toBe(true)
    }
    expect((await stored(s.meta.id)).length).toBe(good)
    s.dispose()
    const again = host.resume(await createJsonlPersistence({ root: jsonlPath(plugin.persistence.locate(s.meta)).split('/cwd-')[0]! }).inspect(s.meta.id))
    again.runTurn(oneTurn(2))
    await plugin.flush(s.meta.id)
    expect(await stored(s.meta.id)).toEqual(again.events)
    await plugin.dispose().catch(() => {})
  })

  test('forks persist their seed once; delegated sub-sessions record their depth', async () => {
    const { plugin, host, stored, raw } = await pluginSetup()
    const parent = host.startSession()
    parent.runTurn(oneTurn(1))
    parent.runTurn(oneTurn(2))
    await plugin.flush()
    const cut = parent.events.findIndex((e) => e.type === 'turn/end') + 1
    const child = host.fork(parent, { seedLength: cut })
    child.runTurn(oneTurn(3))
    const sub = host.delegate(parent)
    sub.runTurn(oneTurn(4))
    await plugin.flush()
    expect(await stored(child.meta.id)).toEqual(child.events)
    expect((await raw(child.meta.id)).split('\n').slice(1, cut + 1)).toEqual((await raw(parent.meta.id)).split('\n').slice(1, cut + 1))
    const listing = await plugin.persistence.list()
    expect(listing.find((l) => l.meta.id === child.meta.id)?.meta).toMatchObject({ parentSession: parent.meta.id, seedLength: cut })
    expect(listing.find((l) => l.meta.id === sub.meta.id)?.meta).toMatchObject({ parentSession: parent.meta.id, delegationDepth: 1 })
    await plugin.dispose()
  })

  test('regression: the reference host refuses a fork point the backends refuse (past the end, inside an open turn: E_BAD_FORK_POINT; negative: E_INVALID_META) and announces no such fork', async () => {
    const { plugin, host, errors, scripted } = await pluginSetup()
    const parent = host.startSession({ id: 'forked-parent' })
    parent.runTurn(oneTurn(1))
    const ended = parent.events.length
    parent.beginTurn('second')
    const created: string[] = []
    host.sessionEvents.on('session/created', (meta) => created.push(meta.id))
    const codeOf = (seedLength: number, id: string) => {
      try {
        host.fork(parent, { id, seedLength })
        return 'forked'
      } catch (err) {
        return isSessionPersistenceError(err) ? err.code : String(err)
      }
    }
    expect(codeOf(parent.events.length + 5, 'past')).toBe('E_BAD_FORK_POINT')
    expect(codeOf(parent.events.length, 'open')).toBe('E_BAD_FORK_POINT')
    expect(codeOf(-1, 'negative')).toBe('E_INVALID_META')
    expect(codeOf(ended, 'good')).toBe('forked')
    expect(created).toEqual(['good'])
    await plugin.flush()
    expect(await plugin.persistence.fork('forked-parent', { id: 'good-too', seedLength: ended }).then(() => 'ok')).toBe('ok')
    expect(scripted.calls.filter((c) => c.op === 'create').map((c) => c.id)).toEqual(['forked-parent', 'good'])
    expect(errors).toEqual([])
    await plugin.dispose()
  })

  test.each(['jsonl', 'memory'] as const)(
    'regression (%s): a session the host created, or forked at 0, through plugin.persistence and wrote nothing to is written from seq 0 by the plugin',
    async (kind) => {
      const persistence = kind === 'jsonl' ? createJsonlPersistence({ root: await tmpRoot() }) : createMemoryPersistence()
      const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: 10_000 })
      const errors: string[] = []
      plugin.on('error', (e) => errors.push(e.code))
      const host = createReferenceHost()
      await plugin.apply(host)
      const parent = host.startSession({ id: 'parent' })
      parent.runTurn(oneTurn(1))
      await plugin.flush('parent')
      const created = { id: 'created', createdAt: 1, delegationDepth: 0 }
      await plugin.persistence.create(created)
      const forked = await plugin.persistence.fork('parent', { id: 'forked', seedLength: 0 })
      for (const meta of [created, forked]) {
        host.sessionEvents.emit('session/created', meta, [])
        for (const [seq, type] of ['turn/start', 'user/message', 'turn/end'].entries()) {
          host.sessionEvents.emit('session/event', meta.id, Object.freeze({ seq, type, time: 1, data: { n: seq } }))
        }
        await plugin.flush(meta.id)
        expect((await persistence.read(meta.id)).events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
      }
      expect((await persistence.inspect('forked')).meta).toMatchObject({ parentSession: 'parent', seedLength: 0 })
      expect(errors).toEqual([])
      await plugin.dispose()
    },
  )

  test('a repeated session/created changes nothing', async () => {
    const { plugin, host, stored } = await pluginSetup()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    host.sessionEvents.emit('session/created', s.meta, [])
    s.runTurn(oneTurn(2))
    await plugin.flush()
    expect(await stored(s.meta.id)).toEqual(s.events)
    await plugin.dispose()
  })

  test('session/disposed drains, then releases the lock so another process can resume', async () => {
    const { plugin, host, root, scripted } = await pluginSetup()
    const s = host.startSession()
    s.beginTurn('unfinished')
    const closed = scripted.next((c) => c.op === 'close' && c.id === s.meta.id)
    s.dispose()
    await closed
    const other = createJsonlPersistence({ root })
    const loaded = await other.load(s.meta.id)
    expect(loaded.events.slice(0, s.events.length)).toEqual(s.events)
    expect(loaded.repair?.closers.at(-1)?.type).toBe('turn/end')
    await other.closeAll()
    await plugin.dispose()
  })

  test('a disposed session that was never materialized leaves its id free for a new session', async () => {
    const { plugin, host, errors, stored } = await pluginSetup()
    const first = host.startSession({ id: 'reused' })
    first.dispose()
    await plugin.flush().catch(() => {})
    const second = host.startSession({ id: 'reused' })
    second.runTurn(oneTurn(1))
    await plugin.flush('reused')
    expect(errors).toEqual([])
    expect(await stored('reused')).toEqual(second.events)
    await plugin.dispose()
  })

  test('two sessions drain independently: a slow disk for one does not hold the other', async () => {
    const { plugin, host, stored, scripted } = await pluginSetup()
    const slow = host.startSession({ id: 'slow' })
    const fast = host.startSession({ id: 'fast' })
    slow.runTurn(oneTurn(1))
    fast.runTurn(oneTurn(1))
    await plugin.flush()
    const release = scripted.pauseAppends('slow') // the slow disk: its append stays in flight
    const slowInFlight = scripted.nextStart((c) => c.op === 'append' && c.id === 'slow')
    slow.runTurn(oneTurn(2))
    fast.runTurn(oneTurn(2))
    await slowInFlight
    await plugin.flush('fast') // resolves while the slow session's append is still in flight
    expect(await stored('fast')).toEqual(fast.events)
    expect((await stored('slow')).length).toBeLessThan(slow.events.length)
    release()
    await plugin.flush('slow')
    expect(await stored('slow')).toEqual(slow.events)
    await plugin.dispose()
  })

  test('runs over any backend: the in-memory reference', async () => {
    const persistence = createMemoryPersistence()
    const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: 5 })
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    await plugin.flush()
    expect((await persistence.inspect(s.meta.id)).events).toEqual(s.events)
    await plugin.dispose()
  })

  test('invalid plugin configuration → E_CONFIG', () => {
    for (const bad of [{}, { root: '/x', flushDelayMs: -1 }, { root: '/x', maxBufferedBytes: 0 }, { persistence: {} }]) {
      let code = 'none'
      try {
        sessionPersistencePlugin(bad as never)
      } catch (err) {
        code = isSessionPersistenceError(err) ? err.code : 'foreign'
      }
      expect(code).toBe('E_CONFIG')
    }
  })
})

describe('dispose', () => {
  test('waits for a drain in flight; afterwards no file-system write happens; later events are E_DISPOSED', async () => {
    fakeTimeouts()
    const { plugin, host, fs, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 5 })
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    await plugin.flush()
    const release = scripted.pauseAppends(s.meta.id)
    const inFlight = scripted.nextStart((c) => c.op === 'append')
    s.beginTurn('in flight')
    s.flush()
    await inFlight // the drain has started and is stuck in a slow append
    const disposing = plugin.dispose()
    const late = s.emit('too/late') // arrives after dispose began: reported, not written
    release()
    await disposing
    expect(errors.map((e) => e.code)).toEqual(['E_DISPOSED'])
    expect(await stored(s.meta.id)).toEqual(s.events.filter((e) => e !== late))
    const after = fs.calls.length
    expect(host.sessionEvents.listenerCount('session/event')).toBe(0)
    expect(vi.getTimerCount()).toBe(0) // no flush delay or retry left to fire
    await vi.advanceTimersByTimeAsync(60_000)
    expect(fs.calls.slice(after).filter((c) => MUTATING_OPS.has(c.op))).toEqual([])
    expect(await plugin.dispose()).toBeUndefined() // idempotent
    expect((await plugin.flush().catch((e) => e)).code).toBe('E_DISPOSED')
  })

  test('dispose during seeding waits for the seed to be written', async () => {
    const { root } = await pluginSetup()
    const host = createReferenceHost()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    const plugin = sessionPersistencePlugin({ root, flushDelayMs: 5 })
    const applying = plugin.apply(host)
    await plugin.dispose()
    // Durable when dispose settles, before anyone awaits apply (which would wait for the seed itself).
    expect((await createJsonlPersistence({ root }).inspect(s.meta.id)).events).toEqual(s.events)
    await applying
  })

  test('Symbol.asyncDispose disposes (await using)', async () => {
    const { plugin, host, stored } = await pluginSetup()
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    await plugin[Symbol.asyncDispose]()
    expect(await stored(s.meta.id)).toEqual(s.events)
    expect((await plugin.apply(host).catch((e) => e)).code).toBe('E_DISPOSED')
  })
})
