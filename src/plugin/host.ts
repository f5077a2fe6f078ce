import { asObject } from '../session/as-object.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'

/** What an agent host emits about its sessions (docs/contract.md §8). */
export interface HostSessionEvents {
  /**
   * `seed`: the events the live session starts with (a fork's inherited events, or a resumed
   * session's stored events); they never arrive on 'session/event'. With `{ firstSeq }` the seed
   * holds the events from `firstSeq` on (a session resumed with `from: 'last-compaction'`).
   */
  'session/created': [meta: SessionMeta, seed: readonly SessionEvent[], options?: SeedOptions]
  /** Frozen, in seq order. */
  'session/event': [sessionId: string, event: SessionEvent]
  /** The host asks for a drain. */
  'session/flush': [sessionId: string]
  'session/disposed': [sessionId: string]
}

/** The third argument of `session/created`. */
export interface SeedOptions {
  /** The seq of `seed[0]`: the seed holds the session's events from here on (default 0). */
  firstSeq?: number
}

export type HostSessionEventName = keyof HostSessionEvents

/** The names a plugin subscribes to, in the manifest's order. */
export const HOST_SESSION_EVENT_NAMES: readonly HostSessionEventName[] = [
  'session/created',
  'session/event',
  'session/flush',
  'session/disposed',
]

/**
 * Any emitter with `on(name, listener)` and `off(name, listener)`: eventemitter3, `node:events`,
 * or a host's own. The plugin needs nothing else from it, and ignores what the methods return.
 */
export interface SessionEventSource<Events extends { [K in keyof Events]: unknown[] }> {
  on<K extends keyof Events & string>(event: K, listener: (...args: Events[K]) => void): unknown
  off<K extends keyof Events & string>(event: K, listener: (...args: Events[K]) => void): unknown
}

export interface LiveSession {
  meta: SessionMeta
  /** The live session's events from `firstSeq` on. */
  events: readonly SessionEvent[]
  /** The seq of `events[0]` when the host holds only a tail (resumed from the last compaction); default 0. */
  firstSeq?: number
}

/** The host interface the plugin registers with. */
export interface AgentHost {
  readonly sessionEvents: SessionEventSource<HostSessionEvents>
  liveSessions(): Iterable<LiveSession>
}

/** Whether `value` has what the plugin uses of a host: an on/off emitter and `liveSessions()`. */
export function isAgentHost(value: unknown): value is AgentHost {
  const host = asObject(value)
  const events = asObject(host?.sessionEvents)
  return typeof events?.on === 'function' && typeof events.off === 'function' && typeof host?.liveSessions === 'function'
}
