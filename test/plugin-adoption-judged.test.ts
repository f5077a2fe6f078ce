import { EventEmitter } from 'node:events'
import { describe, expect, test, vi } from 'vitest'
import { type SessionEvent, type SessionMeta, type SessionPersistence, SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence, MemoryStore } from '../src/testing/index.js'
import { withOverrides } from './helpers/backend-overrides.js'

// SPEC §8: a stored log the host's seed does not cover is a collision (E_EXISTS), nothing
// written — also when reading the log failed once on the way (a passing failure, retried), and
// when the session is held open by the host itself.

const meta = (id: string): SessionMeta => ({ id, createdAt: 1, delegationDepth: 0 })
const ev = (seq: number, type: string, data?: SessionEvent['data']): SessionEvent => (data === undefined ? { seq, type, time: seq + 1 } : { seq, type, time: seq + 1, data })
const theirs = [ev(0, 'turn/start', { turn: 1 }), ev(1, 'note', { theirs: 1 }), ev(2, 'note', { theirs: 2 }), ev(3, 'turn/end', { turn: 1 }), ev(4, 'request/header', { header: {}, reason: 'resume' }), ev(5, 'history/compact', { summary: 'theirs', firstKeptSeq: 4 })]

/** A backend over `store` whose `read` fails with E_IO the first `failures` times. */
function flakyReads(store: MemoryStore, failures: number): SessionPersistence {
  const inner = createMemoryPersistence({ store })
  let left = failures
  return withOverrides(inner, {
    read: async (id, range) => {
      if (left-- > 0) throw new SessionPersistenceError('E_IO', 'EIO: a transient read error', { sessionId: id })
      return inner.read(id, range)
    },
  })
}

describe('adoption judges the stored log whatever happened on the way', () => {
  test.each([0, 1, 2])('regression: a tail seed that does not cover the stored log stays a collision after %i failed read(s): nothing of it is appended', async (failures) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const store = new MemoryStore()
      const owner = createMemoryPersistence({ store })
      await owner.create(meta('a'))
      await owner.append('a', theirs)
      await owner.close('a')
      const plugin = sessionPersistencePlugin({ persistence: flakyReads(store, failures), flushDelayMs: 20 })
      const errors: string[] = []
      plugin.on('error', (e) => errors.push(e.code))
      plugin.on('recovered', () => {})
      const sessionEvents = new EventEmitter()
      await plugin.apply({ sessionEvents, liveSessions: () => [] })
      // The host's own tail from seq 2, not the stored log's.
      sessionEvents.emit('session/created', meta('a'), [ev(2, 'note', { mine: 2 }), ev(3, 'note', { mine: 3 }), ev(4, 'note', { mine: 4 }), ev(5, 'note', { mine: 5 })], { firstSeq: 2 })
      // Each failed read is a passing E_IO, retried after a backoff, until the read succeeds.
      let code: string | undefined
      for (let i = 0; i <= failures; i++) {
        code = await plugin.flush('a').then(() => 'resolved', (e: SessionPersistenceError) => e.code)
        if (code !== 'E_IO') break
        await vi.advanceTimersByTimeAsync(60_000) // the retry's backoff
      }
      expect(code).toBe('E_EXISTS')
      sessionEvents.emit('session/event', 'a', ev(6, 'note', { mine: 6 }))
      expect(await plugin.flush('a').catch((e: SessionPersistenceError) => e.code)).toBe('E_EXISTS')
      expect(errors.at(-1)).toBe('E_EXISTS')
      await plugin.dispose()
      expect((await createMemoryPersistence({ store }).inspect('a')).events).toEqual(theirs)
    } finally {
      vi.useRealTimers()
    }
  })

  test('regression: a seed event that is no JSON (a BigInt) is a collision with a stored log (E_EXISTS), not a passing E_IO retried until it is adopted', async () => {
    const store = new MemoryStore()
    const owner = createMemoryPersistence({ store })
    await owner.create(meta('b'))
    await owner.append('b', theirs.slice(0, 4))
    await owner.close('b')
    const plugin = sessionPersistencePlugin({ persistence: createMemoryPersistence({ store }), flushDelayMs: 20 })
    const errors: string[] = []
    plugin.on('error', (e) => errors.push(e.code))
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    // As long as the stored log, so that the comparison reaches the BigInt.
    sessionEvents.emit('session/created', meta('b'), [ev(0, 'turn/start', { turn: 1 }), { seq: 1, type: 'note', time: 2, data: { n: 1n } } as unknown as SessionEvent, ev(2, 'note'), ev(3, 'turn/end', { turn: 1 })])
    expect(await plugin.flush('b').catch((e: SessionPersistenceError) => e.code)).toBe('E_EXISTS')
    expect(await plugin.flush('b').catch((e: SessionPersistenceError) => e.code)).toBe('E_EXISTS')
    expect(errors).toEqual(['E_EXISTS'])
    await plugin.dispose()
    expect((await createMemoryPersistence({ store }).inspect('b')).events).toEqual(theirs.slice(0, 4))
  })

  test('regression: a session the host holds open on the same backend is judged too: a seed that does not continue it is E_EXISTS, nothing appended', async () => {
    const store = new MemoryStore()
    const backend = createMemoryPersistence({ store })
    await backend.create(meta('c'))
    await backend.append('c', theirs.slice(0, 4))
    await backend.close('c')
    await backend.load('c', { closeOpenTurn: false }) // the host opens it itself, not through plugin.persistence
    const plugin = sessionPersistencePlugin({ persistence: backend, flushDelayMs: 20 })
    plugin.on('error', () => {})
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    sessionEvents.emit('session/created', meta('c'), [ev(0, 'turn/start', { turn: 1 }), ev(1, 'note', { mine: 1 })])
    sessionEvents.emit('session/event', 'c', ev(2, 'note', { mine: 2 }))
    expect(await plugin.flush('c').catch((e: SessionPersistenceError) => e.code)).toBe('E_EXISTS')
    await plugin.dispose()
    expect((await createMemoryPersistence({ store }).inspect('c')).events).toEqual(theirs.slice(0, 4))
  })
})
