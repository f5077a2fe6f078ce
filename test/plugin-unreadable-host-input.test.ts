import { EventEmitter } from 'node:events'
import { describe, expect, test } from 'vitest'
import { type SessionEvent, type SessionMeta, type SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { withOverrides } from './helpers/backend-overrides.js'
import { scriptedBackend } from './helpers/plugin-setup.js'

// Host input the plugin cannot read the way it expects: seeds whose seqs do not run from their
// start, events whose fields throw when read, a liveSessions() that fails. Each is refused once
// with a stable code; none throws into the host's emit, none is retried forever, and the events
// before the bad one are written (SPEC §8).

const meta = (id: string): SessionMeta => ({ id, createdAt: 1, delegationDepth: 0, cwd: '/project' })
const ev = (seq: number, type = 'note'): SessionEvent => Object.freeze({ seq, type, time: 1 })

async function setup() {
  const memory = createMemoryPersistence()
  const scripted = scriptedBackend(memory)
  const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 10_000 })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const sessionEvents = new EventEmitter()
  await plugin.apply({ sessionEvents, liveSessions: () => [] })
  const stored = (id: string) => memory.inspect(id).then((l) => l.events.map((e) => e.seq), (e: SessionPersistenceError) => e.code)
  const appends = () => scripted.calls.filter((c) => c.op === 'append').length
  /** Session `s1` halted for good with `code`: flush rejects again without another append, it was reported once, `seqs` are stored. */
  const haltedFor = async (code: string, seqs: number[]) => {
    const tried = appends()
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code })
    expect(appends()).toBe(tried)
    expect(errors.map((e) => e.code)).toEqual([code])
    expect(await stored('s1')).toEqual(seqs)
    await plugin.dispose().catch(() => {})
  }
  return { plugin, errors, sessionEvents, stored, appends, scripted, haltedFor }
}

describe('a seed whose seqs do not run from its start', () => {
  test.each([
    ['a gap inside it', [ev(0), ev(1), ev(5)]],
    ['no firstSeq, but it starts at 5', [ev(5), ev(6)]],
  ])('%s: refused once as E_INVALID_META, not tracked, nothing written, no append tried', async (_name, seed) => {
    const { plugin, errors, sessionEvents, stored, appends, scripted } = await setup()
    expect(() => sessionEvents.emit('session/created', meta('s1'), seed)).not.toThrow()
    expect(errors.map((e) => [e.code, e.sessionId])).toEqual([['E_INVALID_META', 's1']])
    expect(errors[0]!.message).toMatch(/must have seq \d+, not \d+/)
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_NOT_FOUND' })
    await plugin.dispose()
    expect(appends()).toBe(0)
    expect(scripted.calls.filter((c) => c.op === 'create')).toEqual([])
    expect(await stored('s1')).toBe('E_NOT_FOUND')
  })

  test('a seed whose seq getter throws is refused the same way', async () => {
    const { plugin, errors, sessionEvents, appends } = await setup()
    const bad = { get seq(): number { throw new Error('seq getter') }, type: 'note', time: 1 }
    expect(() => sessionEvents.emit('session/created', meta('s1'), [ev(0), bad])).not.toThrow()
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_META'])
    await plugin.dispose()
    expect(appends()).toBe(0)
  })
})

describe('an event whose fields cannot be read', () => {
  const throwingSeq = () => ({ get seq(): number { throw new Error('seq getter') }, type: 'note', time: 1 })
  const throwingType = (seq: number) => ({ seq, get type(): string { throw new Error('type getter') }, time: 1 })
  const revoked = () => {
    const { proxy, revoke } = Proxy.revocable({ seq: 2, type: 'note', time: 1 }, {})
    revoke()
    return proxy
  }

  test.each([
    ['a throwing seq getter', throwingSeq],
    ['a throwing type getter', () => throwingType(2)],
    ['a revoked Proxy', revoked],
  ])('on session/event, %s: the emit does not throw, the session halts with E_INVALID_EVENT, the events before it are written', async (_name, make) => {
    const { plugin, errors, sessionEvents, stored } = await setup()
    sessionEvents.emit('session/created', meta('s1'), [])
    sessionEvents.emit('session/event', 's1', ev(0))
    sessionEvents.emit('session/event', 's1', ev(1))
    expect(() => sessionEvents.emit('session/event', 's1', make())).not.toThrow()
    sessionEvents.emit('session/event', 's1', ev(3)) // after the halt: not written
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_INVALID_EVENT' })
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_EVENT'])
    expect(await stored('s1')).toEqual([0, 1])
    await plugin.dispose().catch(() => {})
  })

  test.each([
    ['-1', -1],
    ['1.5', 1.5],
    ["'2'", '2'],
    ['NaN', Number.NaN],
    ['-Infinity', Number.NEGATIVE_INFINITY],
    ['2 ** 53', 2 ** 53],
  ])('on session/event, a seq of %s (not a non-negative safe integer, §2): the session halts with E_INVALID_EVENT, the events before it are written', async (_name, seq) => {
    // One below the cursor was taken for an event already stored and dropped without a word.
    const { plugin, errors, sessionEvents, stored } = await setup()
    sessionEvents.emit('session/created', meta('s1'), [])
    sessionEvents.emit('session/event', 's1', ev(0))
    sessionEvents.emit('session/event', 's1', ev(1))
    expect(() => sessionEvents.emit('session/event', 's1', { seq, type: 'note', time: 1 })).not.toThrow()
    sessionEvents.emit('session/event', 's1', ev(2)) // after the halt: not written
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_INVALID_EVENT' })
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_EVENT'])
    expect(await stored('s1')).toEqual([0, 1])
    await plugin.dispose().catch(() => {})
  })

  test('a Symbol session id or a revoked Proxy for an untracked session is reported (E_NOT_FOUND), not thrown', async () => {
    const { plugin, errors, sessionEvents } = await setup()
    expect(() => sessionEvents.emit('session/event', Symbol('id'), ev(0))).not.toThrow()
    expect(() => sessionEvents.emit('session/event', 'nope', revoked())).not.toThrow()
    expect(errors.map((e) => e.code)).toEqual(['E_NOT_FOUND', 'E_NOT_FOUND'])
    expect(errors[0]!.message).toContain("'Symbol(id)'")
    const disposing = plugin.dispose()
    expect(() => sessionEvents.emit('session/event', 's1', revoked())).not.toThrow() // while disposing: reported too
    await disposing
    expect(errors.map((e) => e.code)).toEqual(['E_NOT_FOUND', 'E_NOT_FOUND', 'E_DISPOSED'])
  })

  test('regression: a history/compact whose data getter throws is refused by the backend (E_NOT_JSON) once, never retried; the events before it are written', async () => {
    const { plugin, sessionEvents, haltedFor } = await setup()
    sessionEvents.emit('session/created', meta('s1'), [])
    sessionEvents.emit('session/event', 's1', ev(0))
    sessionEvents.emit('session/event', 's1', ev(1))
    const compact = { seq: 2, type: 'history/compact', time: 1, get data(): never { throw new Error('data getter') } }
    sessionEvents.emit('session/event', 's1', compact)
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_NOT_JSON' })
    await haltedFor('E_NOT_JSON', [0, 1])
  })

  test('regression: a seed event whose type getter throws is refused once (E_NOT_JSON, naming its seq), not retried as E_IO', async () => {
    const { plugin, sessionEvents, haltedFor } = await setup()
    sessionEvents.emit('session/created', meta('s1'), [ev(0), ev(1), throwingType(2)])
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_NOT_JSON', seq: 2 })
    await haltedFor('E_NOT_JSON', [0, 1])
  })
})

describe('a host whose liveSessions() fails', () => {
  test.each([
    ['throws', () => { throw new Error('host not ready') }],
    ['returns undefined', () => undefined],
    ['returns a number (Array.from would take it for an empty list)', () => 5],
    ['returns a plain object', () => ({})],
    ['returns an array-like with holes', () => ({ length: 2 })],
  ])('%s: apply rejects with E_CONFIG, nothing stays subscribed, and apply can be retried with a working host', async (_name, live) => {
    const plugin = sessionPersistencePlugin({ persistence: createMemoryPersistence(), flushDelayMs: 10 })
    const sessionEvents = new EventEmitter()
    await expect(plugin.apply({ sessionEvents, liveSessions: live as never })).rejects.toMatchObject({ code: 'E_CONFIG' })
    expect(sessionEvents.listenerCount('session/event')).toBe(0)
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    expect(sessionEvents.listenerCount('session/event')).toBe(1)
    await plugin.dispose()
  })

  test('an entry that is not { meta, events } is reported (E_INVALID_META) and skipped; the good ones are seeded', async () => {
    const memory = createMemoryPersistence()
    const plugin = sessionPersistencePlugin({ persistence: memory, flushDelayMs: 10 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [null, { meta: meta('good'), events: [ev(0)] }] as never })
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_META'])
    await plugin.dispose()
    expect((await memory.inspect('good')).events.map((e) => e.seq)).toEqual([0])
  })
})

describe('flush with an id that is no string', () => {
  test('regression: is E_INVALID_ID (naming it threw a TypeError)', async () => {
    const plugin = sessionPersistencePlugin({ persistence: createMemoryPersistence(), flushDelayMs: 10 })
    await plugin.apply({ sessionEvents: new EventEmitter(), liveSessions: () => [] })
    for (const bad of [Symbol('id'), { toString: null }, 7]) {
      expect(await plugin.flush(bad as never).catch((e: SessionPersistenceError) => e.code)).toBe('E_INVALID_ID')
    }
    await plugin.dispose()
  })
})

describe('a host that changes an event after emitting it', () => {
  test('regression: an event whose seq changed while buffered halts the session as diverged (E_SEQ_NOT_CONTIGUOUS) after the events before it are written, never retried for ever', async () => {
    const { plugin, sessionEvents, haltedFor } = await setup()
    sessionEvents.emit('session/created', meta('s1'), [])
    sessionEvents.emit('session/event', 's1', ev(0))
    const reused = { seq: 1, type: 'note', time: 1 }
    sessionEvents.emit('session/event', 's1', reused)
    reused.seq = 7 // the host reuses its object
    await expect(plugin.flush('s1')).rejects.toMatchObject({ code: 'E_SEQ_NOT_CONTIGUOUS' })
    await haltedFor('E_SEQ_NOT_CONTIGUOUS', [0])
  })
})

describe('resuming a session the host just disposed', () => {
  test('regression: flush(id) after session/disposed resolves once the session is closed, so a load right after it gets the session (it said E_SESSION_LIVE)', async () => {
    const memory = createMemoryPersistence()
    // A close that takes a while (a lock file to remove, a database round trip).
    const slowClose = withOverrides(memory, { close: async (id) => (await new Promise((r) => setTimeout(r, 50)), memory.close(id)) })
    const plugin = sessionPersistencePlugin({ persistence: slowClose, flushDelayMs: 10_000 })
    const sessionEvents = new EventEmitter()
    await plugin.apply({ sessionEvents, liveSessions: () => [] })
    sessionEvents.emit('session/created', meta('s1'), [])
    sessionEvents.emit('session/event', 's1', ev(0, 'turn/start'))
    sessionEvents.emit('session/event', 's1', ev(1, 'turn/end'))
    sessionEvents.emit('session/disposed', 's1')
    await plugin.flush('s1')
    const loaded = await plugin.persistence.load('s1')
    expect(loaded.events.map((e) => e.seq)).toEqual([0, 1])
    await plugin.dispose()
  })
})
