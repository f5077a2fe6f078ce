import { afterEach, expect, test, vi } from 'vitest'
import {
  createJsonlPersistence,
  EventDroppedError,
  HOST_SESSION_EVENT_NAMES,
  isSessionPersistenceError,
  type SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createFaultInjectingFileSystem, createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { nextError, oneTurn, scriptedBackend } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

afterEach(() => {
  vi.useRealTimers()
})

test('regression: a close that fails at session/disposed is reported, rejects nothing unhandled, and releases the session buffers', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    const scripted = scriptedBackend(createMemoryPersistence())
    const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100, maxBufferedBytes: 6_000 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    plugin.on('recovered', () => {})
    const host = createReferenceHost()
    await plugin.apply(host)

    // Session a: drains fail (a full disk) while ~4.5 kB are buffered, then the host and the log diverge.
    const a = host.startSession({ id: 'a' })
    a.runTurn(oneTurn(1))
    await plugin.flush('a')
    scripted.failAppends('a')
    for (let i = 0; i < 8; i++) a.emit('filler', { text: 'a'.repeat(500) })
    await expect(plugin.flush('a')).rejects.toMatchObject({ code: 'E_IO' })
    host.sessionEvents.emit('session/event', 'a', { seq: a.events.length + 3, type: 'gap', time: 1 })

    // The host disposes it and its close fails.
    scripted.failClose('a')
    const closeFailure = nextError(plugin)
    a.dispose()
    const reported = await closeFailure
    expect(reported).toMatchObject({ code: 'E_IO', sessionId: 'a' })
    expect((reported.cause as Error).message).toContain('injected')

    // Its ~4.5 kB were released: session b may buffer as much while its own drains fail.
    const b = host.startSession({ id: 'b' })
    b.runTurn(oneTurn(1))
    await plugin.flush('b')
    scripted.failAppends('b')
    b.emit('filler', { text: 'b'.repeat(500) })
    await expect(plugin.flush('b')).rejects.toMatchObject({ code: 'E_IO' })
    for (let i = 0; i < 7; i++) b.emit('filler', { text: 'b'.repeat(500) })
    scripted.healAppends('b')
    await plugin.flush('b')
    expect((await scripted.backend.inspect('b')).events).toEqual(b.events)
    expect(errors.filter((e) => e instanceof EventDroppedError)).toEqual([])
    await plugin.dispose()
    // let any stray rejection surface before looking
    await new Promise((resolve) => setImmediate(resolve))
    expect(unhandled).toEqual([])
  } finally {
    process.off('unhandledRejection', onUnhandled)
  }
})

test('a backend close that fails in dispose is reported as a package error; dispose still unsubscribes from the host', async () => {
  const root = await tmpRoot()
  const writer = createJsonlPersistence({ root })
  await writer.create({ id: 'read-only', createdAt: 1, delegationDepth: 0 })
  await writer.append('read-only', [{ seq: 0, type: 'note', time: 1 }])
  await writer.closeAll()
  const fs = createFaultInjectingFileSystem()
  const plugin = sessionPersistencePlugin({ root, fs })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost()
  await plugin.apply(host)
  const s = host.startSession({ id: 'live' })
  s.runTurn(oneTurn(1))
  await plugin.flush()
  await plugin.persistence.load('read-only') // opened by the host and never handed to the plugin
  fs.inject({ op: 'close', path: /read-only/, code: 'EIO' })

  await plugin.dispose() // every tracked event is durable: nothing to reject with
  expect(errors.map((e) => [e.code, isSessionPersistenceError(e)])).toEqual([['E_IO', true]])
  expect(HOST_SESSION_EVENT_NAMES.map((name) => host.sessionEvents.listenerCount(name))).toEqual([0, 0, 0, 0])
  expect((await createJsonlPersistence({ root }).inspect('live')).events).toEqual(s.events)
})
