import { EventEmitter } from 'node:events'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type FileHandle, type FileSystem, type OpenFlags, type SessionEvent, type SessionMeta, type SessionPersistence, SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createNodeFileSystem } from '../src/jsonl/fs/node-file-system.js'
import { withOverrides } from './helpers/backend-overrides.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { createMemoryPersistence } from '../src/testing/index.js'

const meta = (id: string): SessionMeta => ({ id, createdAt: 1, delegationDepth: 0 })
const ev = (seq: number, type: string): SessionEvent => ({ seq, type, time: seq + 1 })

/** A plugin over `backend` whose host created session 'a' and emitted one turn (seqs 0, 1); its reported errors. */
async function oneTurnOn(backend: SessionPersistence) {
  const plugin = sessionPersistencePlugin({ persistence: backend, flushDelayMs: 10_000 })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const sessionEvents = new EventEmitter()
  await plugin.apply({ sessionEvents, liveSessions: () => [] })
  sessionEvents.emit('session/created', meta('a'), [])
  sessionEvents.emit('session/event', 'a', ev(0, 'turn/start'))
  sessionEvents.emit('session/event', 'a', ev(1, 'turn/end'))
  return { plugin, errors, sessionEvents }
}

describe('dispose while a session/disposed drain fails', () => {
  test('regression: its one more attempt comes at once, not after the retry backoff: dispose reports the backend\'s E_IO within its deadline, and the close ran before it settled', async () => {
    const inner = createMemoryPersistence()
    let failing = false
    let release = undefined as (() => void) | undefined
    const calls: string[] = []
    const backend = withOverrides(inner, {
      append: async (id, events) => {
        calls.push('append')
        if (!failing) return inner.append(id, events)
        await new Promise<void>((r) => (release = r)) // in flight until the test lets it fail
        throw new SessionPersistenceError('E_IO', 'the disk says no')
      },
      close: async (id) => (calls.push('close'), inner.close(id)),
    })
    // A backoff (flushDelayMs) far longer than the deadline: sleeping it would time dispose out.
    const plugin = sessionPersistencePlugin({ persistence: backend, flushDelayMs: 120_000 })
    plugin.on('error', () => {})
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    sessionEvents.emit('session/created', meta('a'), [])
    sessionEvents.emit('session/event', 'a', ev(0, 'turn/start'))
    await plugin.flush('a')
    failing = true
    sessionEvents.emit('session/event', 'a', ev(1, 'turn/end'))
    sessionEvents.emit('session/disposed', 'a')
    while (!release) await new Promise((r) => setImmediate(r)) // the disposed session's drain is in flight
    const disposed = plugin.dispose({ timeoutMs: 20_000 }).then(
      () => undefined,
      (e: AggregateError) => e.errors.map((x: SessionPersistenceError) => x.code),
    )
    const first = release
    release = undefined
    first() // the in-flight append fails now, after dispose began
    while (!release) await new Promise((r) => setImmediate(r)) // the one more attempt
    ;(release as () => void)()
    expect(await disposed).toEqual(['E_IO'])
    expect(calls).toEqual(['append', 'append', 'append', 'close'])
  })
})

describe('dispose with a deadline and a close that hangs', () => {
  test('regression: every event durable, the close not answering: dispose settles at its deadline and reports E_TIMEOUT as "every event was made durable", not as events it could not make durable', async () => {
    const inner = createMemoryPersistence()
    const backend = withOverrides(inner, { close: () => new Promise<void>(() => {}) }) // never answers
    const { plugin, errors, sessionEvents } = await oneTurnOn(backend)
    await expect(plugin.dispose({ timeoutMs: 300 })).resolves.toBeUndefined()
    expect(errors.map((e) => e.code)).toEqual(['E_TIMEOUT'])
    expect(errors[0]!.message).toContain('every event was made durable')
    expect((await inner.inspect('a')).events.map((e) => e.seq)).toEqual([0, 1])
  })
})

describe('dispose with a deadline and an owned backend whose one close hangs', () => {
  test('regression: every other lock is released when dispose settles, a session the host opened itself included', async () => {
    const root = await tmpRoot()
    const base = createNodeFileSystem()
    let hang = false
    // The log of session 'aaa': its descriptor's close never answers once `hang` is set.
    const fs: FileSystem = Object.assign(Object.create(base) as FileSystem, {
      open: async (path: string, flags: OpenFlags, mode?: number) => {
        const h = await base.open(path, flags, mode)
        if (!path.includes('aaa')) return h
        return Object.assign(Object.create(h) as FileHandle, { close: () => (hang ? new Promise<void>(() => {}) : h.close()) })
      },
    })
    const plugin = sessionPersistencePlugin({ root, fs, flushDelayMs: 10_000 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    await plugin.persistence.create(meta('bbb')) // opened by the host itself, never announced
    await plugin.persistence.append('bbb', [ev(0, 'turn/start'), ev(1, 'turn/end')])
    sessionEvents.emit('session/created', meta('aaa'), [])
    sessionEvents.emit('session/event', 'aaa', ev(0, 'turn/start'))
    sessionEvents.emit('session/event', 'aaa', ev(1, 'turn/end'))
    await plugin.flush('aaa')
    hang = true
    await expect(plugin.dispose({ timeoutMs: 300 })).resolves.toBeUndefined()
    expect(errors.map((e) => e.code)).toEqual(['E_TIMEOUT'])
    const other = createJsonlPersistence({ root })
    // closeAll started every close at once: 'bbb's lock goes as soon as its own close is done.
    let loaded: number | string = 'E_LOCKED'
    for (let i = 0; i < 500 && loaded === 'E_LOCKED'; i++) {
      loaded = await other.load('bbb').then((l) => l.events.length, (e: SessionPersistenceError) => e.code)
      if (loaded === 'E_LOCKED') await new Promise((r) => setTimeout(r, 20))
    }
    expect(loaded).toBe(2)
    await other.closeAll()
  })

  test('regression: a session the host disposed whose close hangs is not reported as events not made durable', async () => {
    const inner = createMemoryPersistence()
    let hang = false
    const backend = withOverrides(inner, { close: (id) => (hang ? new Promise<void>(() => {}) : inner.close(id)) })
    const { plugin, errors, sessionEvents } = await oneTurnOn(backend)
    await plugin.flush('a')
    hang = true
    sessionEvents.emit('session/disposed', 'a') // drained, then its close hangs
    await expect(plugin.dispose({ timeoutMs: 300 })).resolves.toBeUndefined()
    expect(errors.map((e) => e.code)).toEqual(['E_TIMEOUT'])
    expect(errors[0]!.message).toContain('every event was made durable')
    expect((await inner.inspect('a')).events.map((e) => e.seq)).toEqual([0, 1])
  })
})
