import { unlink, access } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import {
  encodeSessionId,
  EventRefusedError,
  isSessionPersistenceError,
  type JsonValue,
  type SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, pluginSetup, scriptedBackend } from './helpers/plugin-setup.js'

// Retries and flush delays run on faked timeouts; the drains themselves run for real (setImmediate
// and the backends' I/O are not faked), and the tests wait for backend calls, never for time.
const fakeTimeouts = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
afterEach(() => {
  vi.useRealTimers()
})

describe('an event the backend refuses is permanent', () => {
  test('regression: a Date inside one event writes the events before it, reports once naming the seq, and is never retried', async () => {
    fakeTimeouts()
    const { plugin, host, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 100 })
    const s = host.startSession({ id: 'dated' })
    s.runTurn(oneTurn(1))
    s.beginTurn('when did it run?')
    const bad = s.emit('tool/result', { at: new Date(0) } as unknown as JsonValue)
    s.emit('assistant/message', { content: [{ type: 'text', text: 'at midnight' }] })
    s.endTurn()

    const err = await plugin.flush('dated').catch((e: unknown) => e)
    expect(isSessionPersistenceError(err, 'E_NOT_JSON')).toBe(true)
    expect(err).toBeInstanceOf(EventRefusedError)
    expect((err as EventRefusedError).seq).toBe(bad.seq)
    expect(await stored('dated')).toEqual(s.events.slice(0, bad.seq))
    expect(errors.map((e) => e.code)).toEqual(['E_NOT_JSON'])
    expect((errors[0] as EventRefusedError).seq).toBe(bad.seq)

    // Diverged: later events are not written, no retry ever happens, every flush rejects the same way.
    const appends = scripted.calls.filter((c) => c.op === 'append').length
    s.runTurn(oneTurn(2))
    await vi.advanceTimersByTimeAsync(60_000)
    expect(await plugin.flush('dated').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_NOT_JSON')
    expect(scripted.calls.filter((c) => c.op === 'append').length).toBe(appends)
    expect(await stored('dated')).toEqual(s.events.slice(0, bad.seq))
    expect(errors.map((e) => e.code)).toEqual(['E_NOT_JSON'])

    // Until the host disposes it and re-creates it (here: resumes what is stored).
    const closed = scripted.next((c) => c.op === 'close' && c.id === 'dated')
    s.dispose()
    await closed
    const again = host.resume(await plugin.persistence.load('dated'))
    again.runTurn(oneTurn(3))
    await plugin.flush('dated')
    expect(await stored('dated')).toEqual(again.events)
    await plugin.dispose()
  })

  test('the refused event is found wherever it sits in the batch (E_INVALID_EVENT), and a refused first event writes nothing', async () => {
    for (const position of [0, 1, 5, 9]) {
      const memory = createMemoryPersistence()
      const plugin = sessionPersistencePlugin({ persistence: memory, flushDelayMs: 10_000 })
      const codes: string[] = []
      plugin.on('error', (e) => codes.push(e.code))
      const host = createReferenceHost()
      await plugin.apply(host)
      const s = host.startSession({ id: `bad-at-${position}` })
      for (let i = 0; i < 10; i++) s.emit(i === position ? 'bad/envelope' : 'note', { i }, i === position ? { ignorable: false } : {})
      const err = await plugin.flush(s.meta.id).catch((e: unknown) => e)
      expect(isSessionPersistenceError(err, 'E_INVALID_EVENT')).toBe(true)
      expect((err as EventRefusedError).seq).toBe(position)
      const stored = await memory.inspect(s.meta.id).then(
        (l) => l.events,
        () => [],
      )
      expect(stored).toEqual(s.events.slice(0, position))
      expect(codes).toEqual(['E_INVALID_EVENT'])
      await expect(plugin.dispose()).rejects.toBeInstanceOf(AggregateError)
    }
  })
})

describe('passing failures are retried, reported once, and their recovery reported', () => {
  test('regression: a lost lock (a lock file removed by hand) closes and re-adopts the session once its lock can be had', async () => {
    fakeTimeouts()
    const scripted = scriptedBackend(createMemoryPersistence())
    const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100 })
    const errors: SessionPersistenceError[] = []
    const recovered: [string, string][] = []
    plugin.on('error', (e) => errors.push(e))
    plugin.on('recovered', (id, after) => recovered.push([id, after.code]))
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession({ id: 'unlocked' })
    s.runTurn(oneTurn(1))
    await plugin.flush('unlocked')

    // The lock is lost, and another instance holds it for a while.
    scripted.loseLock('unlocked')
    scripted.holdLock('unlocked')
    const from = scripted.calls.length
    s.runTurn(oneTurn(2))
    expect(await plugin.flush('unlocked').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_LOCKED')
    for (let i = 0; i < 12; i++) {
      const retried = scripted.next((c) => c.op === 'load')
      await vi.advanceTimersByTimeAsync(5_000) // the longest backoff
      expect((await retried).outcome).toBe('E_LOCKED')
    }
    scripted.releaseLock('unlocked')
    const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(5_000)
    await written
    await plugin.flush('unlocked')

    expect((await scripted.backend.inspect('unlocked')).events).toEqual(s.events)
    const after = scripted.calls.slice(from)
    // closed before it was adopted again, and adopted without closing the open turn
    expect(after.findIndex((c) => c.op === 'close')).toBeLessThan(after.findIndex((c) => c.op === 'load'))
    expect(after.filter((c) => c.op === 'load').every((c) => (c.options as { closeOpenTurn?: boolean }).closeOpenTurn === false)).toBe(true)
    expect(errors.map((e) => e.code)).toEqual(['E_LOCKED']) // once, not once per retry
    expect(recovered).toEqual([['unlocked', 'E_LOCKED']])
    await plugin.dispose()
  })

  test('regression: a lock file removed by hand under the JSONL backend is noticed, and the session re-adopted and written again', async () => {
    // The lease's clock is faked too: past staleLockMs / 2 without a refresh, the next append confirms the lock first.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
    const { plugin, host, root, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 100 })
    const recovered: string[] = []
    plugin.on('recovered', (_id, after) => recovered.push(after.code))
    const s = host.startSession({ id: 'hand-removed' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    const lockFile = join(root, '.locks', `${encodeSessionId('hand-removed')}.lock`)
    await unlink(lockFile)
    vi.advanceTimersByTime(1_000) // staleLockMs of the setup
    s.runTurn(oneTurn(2))
    expect(await plugin.flush('hand-removed').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_LOCKED')
    const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(5_000)
    await written
    await plugin.flush()
    expect(await stored('hand-removed')).toEqual(s.events)
    expect(errors.map((e) => e.code)).toEqual(['E_LOCKED'])
    expect(recovered).toEqual(['E_LOCKED'])
    await access(lockFile) // the re-adoption took the lock again
    await plugin.dispose()
  })

  test('a full disk is reported once however often the drain is retried, a changed code again, and recovery once', async () => {
    fakeTimeouts()
    const { plugin, host, fs, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 100 })
    const recovered: string[] = []
    plugin.on('recovered', (_id, after) => recovered.push(after.code))
    const s = host.startSession({ id: 'full-disk' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    fs.inject({ op: 'write', path: /full-disk\.jsonl$/, code: 'ENOSPC', times: 6 })
    s.runTurn(oneTurn(2))
    expect(await plugin.flush('full-disk').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_IO')
    for (let i = 0; i < 5; i++) {
      const retried = scripted.next((c) => c.op === 'append')
      await vi.advanceTimersByTimeAsync(5_000)
      expect((await retried).outcome).toBe('E_IO')
    }
    scripted.holdLock('full-disk') // now the code changes: reported again
    let retried = scripted.next((c) => c.op === 'append')
    await vi.advanceTimersByTimeAsync(5_000)
    expect((await retried).outcome).toBe('E_LOCKED')
    scripted.releaseLock('full-disk')
    retried = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(5_000)
    await retried
    await plugin.flush()
    expect(await stored('full-disk')).toEqual(s.events)
    expect(errors.map((e) => e.code)).toEqual(['E_IO', 'E_LOCKED'])
    expect(recovered).toEqual(['E_LOCKED'])
    await plugin.dispose()
  })

  test('a session/created whose meta the backend refuses is reported and not tracked', async () => {
    const { plugin, host, errors, scripted } = await pluginSetup()
    host.sessionEvents.emit('session/created', { id: '', createdAt: 0, delegationDepth: 0 }, [])
    host.sessionEvents.emit('session/created', { id: 'bad-meta', createdAt: -1, delegationDepth: 0 }, [])
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_ID', 'E_INVALID_META'])
    expect((await plugin.flush('bad-meta').catch((e: unknown) => e)) as SessionPersistenceError).toMatchObject({ code: 'E_NOT_FOUND' })
    await plugin.dispose()
    expect(scripted.calls.filter((c) => c.op === 'create')).toEqual([])
  })
})

describe('re-adoption and malformed host input', () => {
  test('a lost lock whose log another writer continued meanwhile: re-adoption finds the divergence, writes nothing of its own over it, and halts', async () => {
    fakeTimeouts()
    const memory = createMemoryPersistence()
    const scripted = scriptedBackend(memory)
    const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    plugin.on('recovered', () => {})
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession({ id: 'stolen' })
    s.runTurn(oneTurn(1))
    await plugin.flush('stolen')
    const mine = s.events.length
    scripted.loseLock('stolen')
    // Another writer appends its own events behind the plugin's back.
    const theirs = [{ seq: mine, type: 'other/writer', time: 1 }]
    await memory.append('stolen', theirs)
    s.runTurn(oneTurn(2))
    expect(await plugin.flush('stolen').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_LOCKED')
    const adopted = scripted.next((c) => c.op === 'load')
    await vi.advanceTimersByTimeAsync(5_000)
    await adopted
    expect(await plugin.flush('stolen').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_SEQ_NOT_CONTIGUOUS')
    expect(errors.map((e) => e.code)).toEqual(['E_LOCKED', 'E_SEQ_NOT_CONTIGUOUS'])
    expect((await memory.inspect('stolen')).events).toEqual([...s.events.slice(0, mine), ...theirs])
    await expect(plugin.dispose()).rejects.toBeInstanceOf(AggregateError)
  })

  test('a host that sends no event or no meta gets a report, not an exception on its call path', async () => {
    const { plugin, host, errors, stored } = await pluginSetup()
    const s = host.startSession({ id: 'sloppy' })
    s.runTurn(oneTurn(1))
    const before = s.events.length
    expect(() => host.sessionEvents.emit('session/event', 'sloppy', undefined as never)).not.toThrow()
    expect(() => host.sessionEvents.emit('session/created', undefined as never, [])).not.toThrow()
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_EVENT', 'E_INVALID_META'])
    s.runTurn(oneTurn(2)) // after the malformed event the session is halted: the events before it are written
    await expect(plugin.flush('sloppy')).rejects.toMatchObject({ code: 'E_INVALID_EVENT' })
    expect(await stored('sloppy')).toEqual(s.events.slice(0, before))
    await plugin.dispose().catch(() => {})
  })

  test('regression: a seed that is not an array is reported (E_INVALID_META) and the session not tracked, not thrown into the host\'s emit', async () => {
    const { plugin, host, errors, stored, scripted } = await pluginSetup()
    const meta = { id: 'no-seed', createdAt: 1, delegationDepth: 0, cwd: '/project' }
    expect(() => host.sessionEvents.emit('session/created', meta, undefined as never)).not.toThrow()
    expect(() => host.sessionEvents.emit('session/created', { ...meta, id: 'object-seed' }, {} as never)).not.toThrow()
    expect(errors.map((e) => [e.code, e.sessionId])).toEqual([
      ['E_INVALID_META', 'no-seed'],
      ['E_INVALID_META', 'object-seed'],
    ])
    await expect(plugin.flush('no-seed')).rejects.toMatchObject({ code: 'E_NOT_FOUND' })
    await plugin.dispose()
    expect(scripted.calls.filter((c) => c.op === 'create')).toEqual([])
    expect(await stored('no-seed')).toEqual([])
  })

  test('regression: a seed holding a non-object event is refused once (E_INVALID_EVENT): the events before it are written, nothing after, and flush rejects', async () => {
    const { plugin, host, errors, stored } = await pluginSetup()
    const meta = (id: string) => ({ id, createdAt: 1, delegationDepth: 0, cwd: '/project' })
    const first = { seq: 0, type: 'turn/start', time: 1 }
    host.sessionEvents.emit('session/created', meta('null-seed'), [null] as never)
    host.sessionEvents.emit('session/created', meta('late-null'), [first, null] as never)
    for (const id of ['null-seed', 'late-null']) {
      for (let seq = 1; seq <= 3; seq++) host.sessionEvents.emit('session/event', id, Object.freeze({ seq, type: seq === 3 ? 'turn/end' : 'note', time: 1 }))
      await expect(plugin.flush(id)).rejects.toMatchObject({ code: 'E_INVALID_EVENT', sessionId: id })
    }
    expect(errors.map((e) => [e.code, e.sessionId])).toEqual([
      ['E_INVALID_EVENT', 'null-seed'],
      ['E_INVALID_EVENT', 'late-null'],
    ])
    expect(await stored('null-seed')).toEqual([])
    expect(await stored('late-null')).toEqual([first])
    await expect(plugin.dispose()).rejects.toBeInstanceOf(AggregateError)
  })
})
