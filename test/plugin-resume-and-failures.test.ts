import { readFile } from 'node:fs/promises'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { createJsonlPersistence, EventDroppedError, isSessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createFaultInjectingFileSystem, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, pluginSetup } from './helpers/plugin-setup.js'

// Retries run on faked timeouts; the tests wait for backend calls, never for time to pass.
const fakeTimeouts = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
afterEach(() => {
  vi.useRealTimers()
})

describe('resume and reload', () => {
  test('a resume after a restart continues the seqs without re-appending stored events', async () => {
    const first = await pluginSetup()
    const s = first.host.startSession({ id: 'resumed' })
    s.runTurn(oneTurn(1))
    await first.plugin.dispose()
    const path = first.persistence.locate(s.meta).path
    const before = await readFile(path, 'utf8')

    const plugin = sessionPersistencePlugin({ root: first.root, flushDelayMs: 10_000 })
    const host = createReferenceHost()
    await plugin.apply(host)
    const again = host.resume(await plugin.persistence.load('resumed'))
    again.runTurn(oneTurn(2))
    await plugin.flush()
    const after = await readFile(path, 'utf8')
    expect(after.startsWith(before)).toBe(true)
    expect(after.trimEnd().split('\n')).toHaveLength(1 + again.events.length)
    expect(await first.stored('resumed')).toEqual(again.events)
    await plugin.dispose()
  })

  test('an HMR-style reload adopts a still-open turn without closing it and persists the live suffix the old plugin never saw', async () => {
    const { root, plugin: old, host, stored, errors } = await pluginSetup()
    const s = host.startSession({ id: 'hmr' })
    s.runTurn(oneTurn(1))
    s.beginTurn('long running')
    const [callId] = s.step({ text: 'working', toolCalls: [{ name: 'bash' }] })
    await old.flush()
    await old.dispose() // releases the lock
    s.toolResult(callId!, 'done') // nobody listening
    s.endStep()
    const fresh = sessionPersistencePlugin({ root, flushDelayMs: 10_000 })
    await fresh.apply(host)
    s.endTurn()
    await fresh.flush()
    const log = await stored('hmr')
    expect(log).toEqual(s.events)
    expect(log.some((e) => JSON.stringify(e.data ?? null).includes('interrupted'))).toBe(false)
    await fresh.dispose()
    // applying again with the same live sessions appends nothing
    const path = createJsonlPersistence({ root }).locate(s.meta).path
    const bytes = await readFile(path)
    const third = sessionPersistencePlugin({ root })
    await third.apply(host)
    await third.flush()
    await third.dispose()
    expect(await readFile(path)).toEqual(bytes)
    expect(errors).toEqual([])
  })

  test('a new session reusing a stored id is a collision: nothing written, E_EXISTS reported and returned by flush', async () => {
    const first = await pluginSetup()
    const s = first.host.startSession({ id: 'taken' })
    s.runTurn(oneTurn(1))
    await first.plugin.dispose()
    const path = first.persistence.locate(s.meta).path
    const bytes = await readFile(path)

    const plugin = sessionPersistencePlugin({ root: first.root })
    const errors: string[] = []
    plugin.on('error', (e) => errors.push(e.code))
    const host = createReferenceHost({ cwd: '/project' })
    await plugin.apply(host)
    const clash = host.startSession({ id: 'taken' })
    clash.runTurn(oneTurn(9))
    const err = await plugin.flush('taken').catch((e) => e)
    expect(isSessionPersistenceError(err, 'E_EXISTS')).toBe(true)
    expect(errors).toEqual(['E_EXISTS'])
    expect(await readFile(path)).toEqual(bytes)
    await plugin.dispose() // a collision is not a durability failure
    // and the lock was released: the owner can still resume it
    const owner = createJsonlPersistence({ root: first.root })
    expect((await owner.load('taken')).events).toHaveLength(s.events.length)
    await owner.closeAll()
  })

  test('a collision is detected in a stored log the host seed does not match', async () => {
    const first = await pluginSetup()
    const s = first.host.startSession({ id: 'diff' })
    s.runTurn(oneTurn(1))
    await first.plugin.flush()
    await first.plugin.dispose()
    const plugin = sessionPersistencePlugin({ root: first.root })
    const host = createReferenceHost()
    await plugin.apply(host)
    const loaded = await createJsonlPersistence({ root: first.root }).inspect('diff')
    host.resume({ ...loaded, events: loaded.events.map((e, i) => (i === 1 ? { ...e, data: { content: 'edited' } } : e)) })
    expect(isSessionPersistenceError(await plugin.flush('diff').catch((e) => e), 'E_EXISTS')).toBe(true)
    await plugin.dispose()
  })
})

describe('failures', () => {
  test('a failing drain keeps events buffered, reports, retries, and loses or duplicates nothing', async () => {
    fakeTimeouts()
    const { plugin, host, fs, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 20 })
    plugin.on('recovered', () => {})
    const s = host.startSession({ id: 'flaky' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    fs.inject({ op: 'write', path: /flaky\.jsonl$/, code: 'ENOSPC', times: 2 })
    s.runTurn(oneTurn(2))
    const err = await plugin.flush().catch((e) => e)
    expect(err).toBeInstanceOf(AggregateError)
    expect((err as AggregateError).errors.map((e: { sessionId: string }) => e.sessionId)).toEqual(['flaky'])
    s.runTurn(oneTurn(3)) // drains at once, and fails once more
    await scripted.next((c) => c.op === 'append')
    const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(5_000) // the retry
    await written
    expect(await stored('flaky')).toEqual(s.events)
    expect(errors.map((e) => e.code)).toEqual(['E_IO']) // once, however often it was retried
    await plugin.flush()
    await plugin.dispose()
  })

  test('a broken writer is recovered by closing and re-adopting the session before the retry', async () => {
    fakeTimeouts()
    const { plugin, host, fs, stored, errors, scripted } = await pluginSetup({ flushDelayMs: 20 })
    plugin.on('recovered', () => {})
    const s = host.startSession({ id: 'broken' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    fs.inject({ op: 'datasync', path: /broken\.jsonl$/, code: 'EIO', times: 1 })
    fs.inject({ op: 'truncate', path: /broken\.jsonl$/, code: 'EIO', times: 1 })
    s.runTurn(oneTurn(2))
    await plugin.flush().catch(() => {})
    const from = scripted.calls.length
    s.runTurn(oneTurn(3))
    const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
    await vi.advanceTimersByTimeAsync(5_000) // the retry: close, adopt again, append
    await written
    await plugin.flush()
    const ops = scripted.calls.slice(from).map((c) => `${c.op}:${c.outcome}`)
    const broke = ops.indexOf('append:E_WRITER_BROKEN')
    expect(broke).toBeGreaterThanOrEqual(0)
    expect(ops.slice(broke + 1)).toEqual(['close:ok', 'load:ok', 'append:ok']) // closed and adopted again before the retry
    expect(await stored('broken')).toEqual(s.events)
    expect(errors.map((e) => e.code)).toContain('E_WRITER_BROKEN')
    await plugin.dispose()
  })

  test('past maxBufferedBytes while drains fail, new events are dropped and each drop is reported', async () => {
    const { plugin, host, fs, errors, root } = await pluginSetup({ flushDelayMs: 10, maxBufferedBytes: 4000 })
    const s = host.startSession({ id: 'full' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    fs.inject({ op: 'write', path: /full\.jsonl$/, code: 'ENOSPC' })
    s.runTurn(oneTurn(2))
    await plugin.flush().catch(() => {})
    for (let i = 0; i < 20; i++) s.emit('filler', { text: 'z'.repeat(300) })
    const drops = errors.filter((e) => e instanceof EventDroppedError && e.code === 'E_IO')
    expect(drops.length).toBeGreaterThan(0)
    expect(drops.length).toBeLessThanOrEqual(20)
    const err = await plugin.dispose().catch((e) => e)
    expect(err).toBeInstanceOf(AggregateError)
    expect((err as Error).message).toContain("'full'")
    // dispose released everything even though it failed
    const other = createJsonlPersistence({ root })
    await other.load('full')
    await other.closeAll()
  })

  test('a plugin whose backend locks are held elsewhere reports E_LOCKED and writes once the lock is free', async () => {
    const { root } = await pluginSetup()
    const holder = createJsonlPersistence({ root })
    const host = createReferenceHost()
    const s = host.startSession({ id: 'contended' })
    s.runTurn(oneTurn(1))
    const p1 = sessionPersistencePlugin({ root, flushDelayMs: 20 })
    await p1.apply(host)
    await p1.flush()
    await p1.dispose()
    await holder.load('contended')
    const p2 = sessionPersistencePlugin({ root, flushDelayMs: 20 })
    const codes: string[] = []
    p2.on('error', (e) => codes.push(e.code))
    await p2.apply(host)
    s.runTurn(oneTurn(2))
    expect(isSessionPersistenceError(await p2.flush('contended').catch((e) => e), 'E_LOCKED')).toBe(true)
    await holder.closeAll()
    await p2.flush('contended')
    expect(codes[0]).toBe('E_LOCKED')
    const fs = createFaultInjectingFileSystem()
    const check = createJsonlPersistence({ root, fs })
    expect((await check.inspect('contended')).events).toEqual(s.events)
    await p2.dispose()
  })
})
