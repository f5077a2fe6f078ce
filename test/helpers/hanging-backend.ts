import { expect } from 'vitest'
import type { SessionEvent, SessionMeta, SessionPersistence, SessionPersistenceError } from '../../src/index.js'
import { MemoryStore } from '../../src/memory/memory-persistence.js'
import { createMemoryPersistence } from '../../src/testing/index.js'

/** The in-memory backend whose `append` (or `create`) of one session can be held in flight until released. */
export function hangingBackend(store = new MemoryStore()) {
  const inner = createMemoryPersistence({ store })
  const held = new Map<string, { gate: Promise<void>; started: () => void }>()
  const appends: { id: string; seqs: number[] }[] = []
  /** Every append as it is called (before it is held or stored): what the plugin issued. */
  const issued: { id: string; seqs: number[] }[] = []
  const backend: SessionPersistence = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'append') {
        return async (id: string, events: readonly SessionEvent[]) => {
          issued.push({ id, seqs: events.map((e) => e.seq) })
          const h = held.get(`append:${id}`)
          if (h) {
            h.started()
            await h.gate
          }
          await target.append(id, events)
          appends.push({ id, seqs: events.map((e) => e.seq) })
        }
      }
      if (prop === 'create') {
        return async (meta: SessionMeta) => {
          const h = held.get(`create:${meta.id}`)
          if (h) {
            h.started()
            await h.gate
          }
          return target.create(meta)
        }
      }
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return {
    store,
    backend,
    appends,
    issued,
    /** Holds the next `op` of `id` (and every one after it) until `release`. */
    hang(op: 'append' | 'create', id: string) {
      let release = () => {}
      let started = () => {}
      const startedP = new Promise<void>((r) => (started = r))
      const gate = new Promise<void>((r) => (release = r))
      held.set(`${op}:${id}`, { gate, started })
      return {
        started: startedP,
        release: () => {
          held.delete(`${op}:${id}`)
          release()
        },
      }
    },
    stored: async (id: string) => (await createMemoryPersistence({ store }).read(id)).events,
  }
}

/** A dispose's or flush's AggregateError as sorted `id:code`. */
export function codesOf(err: unknown): string[] {
  expect(err).toBeInstanceOf(AggregateError)
  return (err as AggregateError).errors.map((e: SessionPersistenceError) => `${e.sessionId}:${e.code}`).sort()
}
