import { afterEach, expect, test, vi } from 'vitest'
import { EventDroppedError, type SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, scriptedBackend } from './helpers/plugin-setup.js'

// The host's 'error' and 'recovered' listeners are called in the middle of the plugin's own
// bookkeeping. One that throws is the host's bug, but it must not leave that bookkeeping half
// done: the throw goes to the logger and the plugin goes on as if the listener had returned.

afterEach(() => {
  vi.useRealTimers()
})

function setup(options: { maxBufferedBytes?: number } = {}) {
  const scripted = scriptedBackend(createMemoryPersistence())
  const warnings: string[] = []
  const plugin = sessionPersistencePlugin({ persistence: scripted.backend, flushDelayMs: 100, logger: { warn: (m) => warnings.push(m) }, ...options })
  return { scripted, warnings, plugin }
}

function catchUnhandled(): { unhandled: unknown[]; stop: () => void } {
  const unhandled: unknown[] = []
  const on = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', on)
  return { unhandled, stop: () => process.off('unhandledRejection', on) }
}

test("a throwing 'error' listener: the buffer stays bounded (each drop reported), the retry is armed, and what fitted is written once the disk heals", async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
  const { scripted, warnings, plugin } = setup({ maxBufferedBytes: 3_000 })
  const heard: SessionPersistenceError[] = []
  plugin.on('error', (e) => {
    heard.push(e)
    throw new Error('listener boom')
  })
  const host = createReferenceHost()
  await plugin.apply(host)
  const s = host.startSession({ id: 'full' })
  s.runTurn(oneTurn(1))
  await plugin.flush('full')
  scripted.failAppends('full')
  s.emit('filler', { text: 'x'.repeat(400) })
  await expect(plugin.flush('full')).rejects.toMatchObject({ code: 'E_IO' })
  const fillers = Array.from({ length: 10 }, () => s.emit('filler', { text: 'x'.repeat(400) }))

  const drops = heard.filter((e): e is EventDroppedError => e instanceof EventDroppedError)
  const firstDropped = fillers.findIndex((f) => f.seq === drops[0]?.seq)
  expect(firstDropped).toBeGreaterThan(0) // some fitted, the rest were dropped: the budget held
  expect(drops.map((d) => d.seq)).toEqual(fillers.slice(firstDropped).map((f) => f.seq))
  // The failure itself was told once (not at every retry), and each throw reached the logger.
  expect(heard.filter((e) => !(e instanceof EventDroppedError)).map((e) => e.code)).toEqual(['E_IO'])
  expect(warnings.filter((w) => w.includes("the host's 'error' listener threw (Error: listener boom)")).length).toBe(heard.length)
  expect(warnings.some((w) => w.includes('E_IO: ') && w.includes('disk full (injected)'))).toBe(true)

  // The background retry (armed although the listener threw) writes what fitted, without a flush.
  scripted.healAppends('full')
  const written = scripted.next((c) => c.op === 'append' && c.outcome === 'ok')
  await vi.advanceTimersByTimeAsync(5_000)
  await written
  expect((await scripted.backend.inspect('full')).events).toEqual(s.events.slice(0, drops[0]!.seq))
  await expect(plugin.dispose()).rejects.toBeInstanceOf(AggregateError) // the drops, as with a listener that returns
})

test("a throwing 'recovered' listener: once the disk heals, flush and dispose resolve, and recovery is told once", async () => {
  const { scripted, warnings, plugin } = setup()
  plugin.on('error', () => {})
  let told = 0
  plugin.on('recovered', () => {
    told++
    throw new Error('recovered boom')
  })
  const host = createReferenceHost()
  await plugin.apply(host)
  const s = host.startSession({ id: 'healed' })
  s.runTurn(oneTurn(1))
  await plugin.flush('healed')
  scripted.failAppends('healed')
  s.runTurn(oneTurn(2))
  await expect(plugin.flush('healed')).rejects.toMatchObject({ code: 'E_IO' })
  scripted.healAppends('healed')
  await plugin.flush('healed')
  await plugin.flush('healed')
  expect((await scripted.backend.inspect('healed')).events).toEqual(s.events)
  expect(told).toBe(1)
  expect(warnings).toEqual([`the host's 'recovered' listener threw (Error: recovered boom) when told: session 'healed': drains succeed again after E_IO`])
  await plugin.dispose()
})

test("a throwing 'error' listener told of a close that failed at session/disposed: nothing rejects unhandled, and dispose releases the host", async () => {
  const { unhandled, stop } = catchUnhandled()
  try {
    const { scripted, warnings, plugin } = setup()
    plugin.on('error', () => {
      throw new Error('listener boom')
    })
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession({ id: 'closing' })
    s.runTurn(oneTurn(1))
    await plugin.flush('closing')
    scripted.failClose('closing')
    const closed = scripted.next((c) => c.op === 'close' && c.id === 'closing')
    s.dispose()
    await closed
    await new Promise((resolve) => setTimeout(resolve, 50)) // a rejection nobody handles is reported by then
    expect(unhandled).toEqual([])
    expect(warnings.some((w) => w.startsWith("the host's 'error' listener threw (Error: listener boom) when told: E_IO: ") && w.includes('injected'))).toBe(true)
    await plugin.dispose()
    expect(host.sessionEvents.listenerCount('session/event')).toBe(0) // unsubscribed from the host
    expect((await scripted.backend.inspect('closing')).events).toEqual(s.events)
  } finally {
    stop()
  }
})

test("a throwing 'error' listener never throws into the host's emit", async () => {
  const { warnings, plugin } = setup()
  plugin.on('error', () => {
    throw new Error('listener boom')
  })
  const host = createReferenceHost()
  await plugin.apply(host)
  // An event for a session the plugin does not track is reported (E_NOT_FOUND) from inside the host's emit.
  expect(host.sessionEvents.emit('session/event', 'nobody', { seq: 0, type: 'x', time: 1 })).toBe(true)
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toMatch(/^the host's 'error' listener threw \(Error: listener boom\) when told: E_NOT_FOUND: /)
  await plugin.dispose()
})

test('flushDelayMs past what a timer can hold is refused E_CONFIG (Node would fire such a timer after 1 ms, and the stall watchdog with it)', () => {
  for (const flushDelayMs of [2 ** 31, Number.MAX_SAFE_INTEGER]) {
    expect(() => sessionPersistencePlugin({ persistence: createMemoryPersistence(), flushDelayMs })).toThrow(expect.objectContaining({ code: 'E_CONFIG', message: expect.stringContaining('flushDelayMs') }))
  }
  expect(() => sessionPersistencePlugin({ persistence: createMemoryPersistence(), flushDelayMs: 2 ** 31 - 1 })).not.toThrow()
})
