import { EventEmitter } from 'node:events'
import { expect, test } from 'vitest'
import {
  type AgentHost,
  HOST_SESSION_EVENT_NAMES,
  type HostSessionEvents,
  type LiveSession,
  type SessionEvent,
  type SessionEventSource,
  type SessionMeta,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'

/** A host on node:events, as many agent hosts are built. */
class NodeEventsHost implements AgentHost {
  readonly sessionEvents = new EventEmitter<HostSessionEvents>()
  readonly #live = new Map<string, LiveSession & { events: SessionEvent[] }>()
  liveSessions(): Iterable<LiveSession> {
    return [...this.#live.values()]
  }
  start(id: string): void {
    const meta: SessionMeta = Object.freeze({ id, createdAt: 1_700_000_000_000, delegationDepth: 0 })
    this.#live.set(id, { meta, events: [] })
    this.sessionEvents.emit('session/created', meta, [])
  }
  emit(id: string, type: string): SessionEvent {
    const session = this.#live.get(id)!
    const event = Object.freeze({ seq: session.events.length, type, time: 1_700_000_000_000 + session.events.length })
    session.events.push(event)
    this.sessionEvents.emit('session/event', id, event)
    return event
  }
  events(id: string): readonly SessionEvent[] {
    return this.#live.get(id)?.events ?? []
  }
}

/** A host's own minimal emitter: on and off, nothing else. */
class TinyEmitter implements SessionEventSource<HostSessionEvents> {
  readonly listeners = new Map<string, Set<unknown>>()
  on<K extends keyof HostSessionEvents>(event: K, listener: (...args: HostSessionEvents[K]) => void): void {
    const set = this.listeners.get(event) ?? new Set()
    set.add(listener)
    this.listeners.set(event, set)
  }
  off<K extends keyof HostSessionEvents>(event: K, listener: (...args: HostSessionEvents[K]) => void): void {
    this.listeners.get(event)?.delete(listener)
  }
  emit<K extends keyof HostSessionEvents>(event: K, ...args: HostSessionEvents[K]): void {
    for (const l of this.listeners.get(event) ?? []) (l as (...a: HostSessionEvents[K]) => void)(...args)
  }
}

test('a host whose sessionEvents is a node:events EventEmitter is persisted, and unsubscribed at dispose', async () => {
  const persistence = createMemoryPersistence()
  const plugin = sessionPersistencePlugin({ persistence })
  const host = new NodeEventsHost()
  await plugin.apply(host)
  expect(HOST_SESSION_EVENT_NAMES.map((n) => host.sessionEvents.listenerCount(n))).toEqual([1, 1, 1, 1])
  host.start('node-host')
  for (const type of ['turn/start', 'user/message', 'turn/end']) host.emit('node-host', type)
  await plugin.flush('node-host')
  expect((await persistence.inspect('node-host')).events).toEqual(host.events('node-host'))
  await plugin.dispose()
  expect(HOST_SESSION_EVENT_NAMES.map((n) => host.sessionEvents.listenerCount(n))).toEqual([0, 0, 0, 0])
})

test("a host's own emitter with only on and off works too", async () => {
  const persistence = createMemoryPersistence()
  const plugin = sessionPersistencePlugin({ persistence })
  const sessionEvents = new TinyEmitter()
  const meta: SessionMeta = { id: 'tiny-host', createdAt: 1_700_000_000_000, delegationDepth: 0 }
  const events: SessionEvent[] = [{ seq: 0, type: 'turn/start', time: 1 }]
  const host: AgentHost = { sessionEvents, liveSessions: () => [{ meta, events }] }
  await plugin.apply(host) // seeds the live session
  const next: SessionEvent = { seq: 1, type: 'turn/end', time: 2 }
  events.push(next)
  sessionEvents.emit('session/event', 'tiny-host', next)
  await plugin.flush()
  expect((await persistence.inspect('tiny-host')).events).toEqual(events)
  await plugin.dispose()
  expect([...sessionEvents.listeners.values()].map((s) => s.size)).toEqual([0, 0, 0, 0])
})

test('a host without an on/off emitter or liveSessions is refused with E_CONFIG, and the plugin can still be applied to a real host', async () => {
  const plugin = sessionPersistencePlugin({ persistence: createMemoryPersistence() })
  const bad = [undefined, {}, { sessionEvents: {}, liveSessions: () => [] }, { sessionEvents: new EventEmitter() }] as unknown as AgentHost[]
  for (const host of bad) {
    expect(await plugin.apply(host).then(() => 'applied', (e: { code?: string }) => e.code ?? String(e))).toBe('E_CONFIG')
  }
  const host = new NodeEventsHost()
  await plugin.apply(host)
  expect(HOST_SESSION_EVENT_NAMES.map((name) => host.sessionEvents.listenerCount(name))).toEqual([1, 1, 1, 1])
  await plugin.dispose()
})
