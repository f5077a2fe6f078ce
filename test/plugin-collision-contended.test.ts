// A session/created whose id another instance is writing, or materializes first: a collision
// (E_EXISTS, nothing written, never retried), not a lock wait or a retry loop.
import { afterEach, expect, test, vi } from 'vitest'
import { createJsonlPersistence, type SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, scriptedBackend } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

afterEach(() => {
  vi.useRealTimers()
})

async function twoHosts() {
  const root = await tmpRoot()
  const side = (name: string) => {
    const scripted = scriptedBackend(createJsonlPersistence({ root, staleLockMs: 1000 }))
    const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const host = createReferenceHost({ cwd: `/project-${name}` })
    return { scripted, plugin, errors, host }
  }
  const a = side('a')
  const b = side('b')
  await a.plugin.apply(a.host)
  await b.plugin.apply(b.host)
  const stored = async (id: string) => (await createJsonlPersistence({ root }).inspect(id)).events
  return { a, b, stored }
}

test('a new session reusing the id of a log another instance is writing is a collision at once, not a lock wait', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const { a, b, stored } = await twoHosts()
  const sa = a.host.startSession({ id: 'dup' })
  sa.runTurn(oneTurn(1))
  await a.plugin.flush('dup') // A holds the session open (and its lock)

  const sb = b.host.startSession({ id: 'dup' })
  sb.runTurn(oneTurn(2))
  expect(await b.plugin.flush('dup').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_EXISTS')
  expect(b.errors.map((e) => e.code)).toEqual(['E_EXISTS'])
  expect(vi.getTimerCount()).toBe(0) // no retry is scheduled: a collision is final
  expect(b.scripted.calls.filter((c) => c.op === 'append')).toEqual([])
  expect(await stored('dup')).toEqual(sa.events)

  sa.runTurn(oneTurn(3)) // A keeps writing undisturbed
  await a.plugin.flush('dup')
  expect(await stored('dup')).toEqual(sa.events)
  await b.plugin.dispose() // a collision is not a durability failure
  await a.plugin.dispose()
  expect(a.errors).toEqual([])
})

test('two instances creating one new id: the one that materializes second reports a collision and stops retrying', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const { a, b, stored } = await twoHosts()
  const sa = a.host.startSession({ id: 'race' })
  const sb = b.host.startSession({ id: 'race' })
  await b.scripted.next((c) => c.op === 'create' && c.id === 'race') // both registered, nothing on disk
  sa.runTurn(oneTurn(1))
  await a.plugin.flush('race')
  await a.plugin.dispose() // A's log is published and its lock released
  sb.runTurn(oneTurn(2))

  await b.plugin.flush('race').catch(() => undefined) // the append finds A's log
  const retried = b.scripted.next((c) => c.op === 'create' || c.op === 'append')
  await vi.advanceTimersToNextTimerAsync() // the one retry: it finds the log is not this host's
  await retried
  expect(await b.plugin.flush('race').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_EXISTS')
  expect(vi.getTimerCount()).toBe(0) // no further retry is scheduled
  expect(b.errors.at(-1)?.code).toBe('E_EXISTS')
  expect(await stored('race')).toEqual(sa.events)
  await b.plugin.dispose()
})

test('a resumed session waiting for a lock held elsewhere: the stored log is read once, then adopted when the lock is free', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const memory = createMemoryPersistence()
  let inspects = 0
  const counted = new Proxy(memory, {
    get(target, prop) {
      if (prop === 'inspect') return (id: string) => (inspects++, target.inspect(id))
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const scripted = scriptedBackend(counted)
  const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100 })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost()
  await plugin.apply(host)
  const first = host.startSession({ id: 'held' })
  first.runTurn(oneTurn(1))
  await plugin.flush('held')
  const closed = scripted.next((c) => c.op === 'close')
  first.dispose()
  await closed

  scripted.holdLock('held') // another instance writes it meanwhile
  const resumed = host.resume(await memory.inspect('held'))
  inspects = 0
  resumed.runTurn(oneTurn(2))
  expect(await plugin.flush('held').catch((e: unknown) => (e as SessionPersistenceError).code)).toBe('E_LOCKED')
  for (let i = 0; i < 3; i++) {
    const retried = scripted.next((c) => c.op === 'load')
    await vi.advanceTimersToNextTimerAsync()
    expect(await retried).toMatchObject({ outcome: 'E_LOCKED' })
  }
  expect(inspects).toBe(1)
  scripted.releaseLock('held')
  const adopted = scripted.next((c) => c.op === 'append')
  await vi.advanceTimersToNextTimerAsync()
  await adopted
  await plugin.flush('held')
  expect((await memory.inspect('held')).events).toEqual(resumed.events)
  expect(errors.map((e) => e.code)).toEqual(['E_LOCKED'])
  await plugin.dispose()
})
