import { afterEach, expect, test, vi } from 'vitest'
import { EventDroppedError, type SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, scriptedBackend } from './helpers/plugin-setup.js'

afterEach(() => {
  vi.useRealTimers()
})

test('past maxBufferedBytes each dropped event is reported as EventDroppedError, with the failure that filled the buffer as code and cause', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const scripted = scriptedBackend(createMemoryPersistence())
  const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100, maxBufferedBytes: 3_000 })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const recovered: string[] = []
  plugin.on('recovered', (_id, after) => recovered.push(after.code))
  const host = createReferenceHost()
  await plugin.apply(host)
  const s = host.startSession({ id: 'held' })
  s.runTurn(oneTurn(1))
  await plugin.flush()
  scripted.holdLock('held')
  s.emit('filler', { text: 'x'.repeat(400) })
  await expect(plugin.flush('held')).rejects.toMatchObject({ code: 'E_LOCKED' })
  const fillers = Array.from({ length: 10 }, () => s.emit('filler', { text: 'x'.repeat(400) }))

  const drops = errors.filter((e): e is EventDroppedError => e instanceof EventDroppedError)
  const firstDropped = fillers.findIndex((f) => f.seq === drops[0]?.seq)
  expect(firstDropped).toBeGreaterThan(0) // some fitted, the rest were dropped
  expect(drops.map((d) => d.seq)).toEqual(fillers.slice(firstDropped).map((f) => f.seq)) // each drop, once
  for (const d of drops) {
    expect(d.code).toBe('E_LOCKED')
    expect(d.name).toBe('EventDroppedError')
    expect((d.cause as SessionPersistenceError).code).toBe('E_LOCKED')
    expect(d.maxBufferedBytes).toBe(3_000)
  }
  expect(errors.filter((e) => !(e instanceof EventDroppedError)).map((e) => e.code)).toEqual(['E_LOCKED'])

  // What fitted is written once the lock is free; nothing after the first drop ever is.
  scripted.releaseLock('held')
  const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
  await vi.advanceTimersByTimeAsync(5_000)
  await written
  expect(await plugin.flush('held').catch((e: unknown) => e)).toBeInstanceOf(EventDroppedError)
  expect(recovered).toEqual(['E_LOCKED'])
  const firstDrop = drops[0]!.seq
  expect((await scripted.backend.inspect('held')).events).toEqual(s.events.slice(0, firstDrop))
  await expect(plugin.dispose()).rejects.toBeInstanceOf(AggregateError)
})
