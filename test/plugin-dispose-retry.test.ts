import { EventEmitter } from 'node:events'
import { describe, expect, test } from 'vitest'
import { type SessionEvent, type SessionMeta, type SessionPersistence, SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'

const meta = (id: string): SessionMeta => ({ id, createdAt: 1, delegationDepth: 0 })
const ev = (seq: number, type: string): SessionEvent => ({ seq, type, time: seq + 1 })

describe('dispose while a session/disposed drain fails', () => {
  test('regression: its one more attempt comes at once, not after the retry backoff: dispose reports the backend\'s E_IO within its deadline, and the close ran before it settled', async () => {
    const inner = createMemoryPersistence()
    let failing = false
    let release = undefined as (() => void) | undefined
    const calls: string[] = []
    const backend = new Proxy(inner, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown
        if (typeof value !== 'function') return value
        const fn = value as (...a: unknown[]) => Promise<unknown>
        if (prop === 'append') {
          return async (...args: unknown[]) => {
            calls.push('append')
            if (!failing) return fn.apply(target, args)
            await new Promise<void>((r) => (release = r)) // in flight until the test lets it fail
            throw new SessionPersistenceError('E_IO', 'the disk says no')
          }
        }
        if (prop === 'close') return async (...args: unknown[]) => (calls.push('close'), fn.apply(target, args))
        return fn.bind(target)
      },
    }) as SessionPersistence
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
    const backend = new Proxy(inner, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown
        if (prop === 'close') return () => new Promise(() => {}) // never answers
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    }) as SessionPersistence
    const plugin = sessionPersistencePlugin({ persistence: backend, flushDelayMs: 10_000 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    sessionEvents.emit('session/created', meta('a'), [])
    sessionEvents.emit('session/event', 'a', ev(0, 'turn/start'))
    sessionEvents.emit('session/event', 'a', ev(1, 'turn/end'))
    await expect(plugin.dispose({ timeoutMs: 300 })).resolves.toBeUndefined()
    expect(errors.map((e) => e.code)).toEqual(['E_TIMEOUT'])
    expect(errors[0]!.message).toContain('every event was made durable')
    expect((await inner.inspect('a')).events.map((e) => e.seq)).toEqual([0, 1])
  })
})
