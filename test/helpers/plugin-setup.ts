import { readFile } from 'node:fs/promises'
import {
  createJsonlPersistence,
  isSessionPersistenceError,
  type LoadOptions,
  type SessionEvent,
  type SessionMeta,
  type SessionPersistence,
  sessionPersistencePlugin,
  type SessionPersistencePlugin,
  SessionPersistenceError,
} from '../../src/index.js'
import { createFaultInjectingFileSystem, createReferenceHost } from '../../src/testing/index.js'
import { tmpRoot } from './tmp-root.js'

export async function pluginSetup(options: { flushDelayMs?: number; maxBufferedBytes?: number } = {}) {
  const root = await tmpRoot()
  const fs = createFaultInjectingFileSystem()
  const persistence = createJsonlPersistence({ root, fs, staleLockMs: 1000 })
  const scripted = scriptedBackend(persistence)
  const plugin = sessionPersistencePlugin({
    persistence: scripted.backend,
    flushDelayMs: options.flushDelayMs ?? 10_000,
    ...(options.maxBufferedBytes ? { maxBufferedBytes: options.maxBufferedBytes } : {}),
  })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost({ cwd: '/project' })
  await plugin.apply(host)
  /** What a fresh instance reads from disk, without repairing anything. */
  const stored = async (id: string): Promise<readonly SessionEvent[]> => {
    const inspected = await createJsonlPersistence({ root }).inspect(id).catch(() => undefined)
    if (!inspected) return []
    return inspected.events.slice(0, inspected.events.length - (inspected.repair?.closers.length ?? 0))
  }
  const raw = (id: string, cwd = '/project') => readFile(persistence.locate({ id, createdAt: 0, delegationDepth: 0, cwd }).path, 'utf8')
  return { root, fs, persistence, scripted, plugin, host, errors, stored, raw }
}

export const oneTurn = (n: number) => ({
  user: `do thing ${n}`,
  header: { model: 'ref-1', tools: ['bash'] },
  steps: [{ text: `calling a tool for ${n}`, toolCalls: [{ name: 'bash', arguments: { cmd: `echo ${n}` } }], results: [`${n}`] }, { text: `done ${n}` }],
})

export interface BackendCall {
  op: 'create' | 'append' | 'load' | 'close'
  id: string
  /** append: the seqs of the batch; load: the options. */
  seqs?: number[]
  options?: unknown
  /** The code the call rejected with, or 'ok'. */
  outcome: string
}

/**
 * A backend wrapper that records every create/append/load/close once it settles, lets a test
 * wait for a call explicitly (no sleeps), and plays the lock and close faults the plugin must
 * survive:
 * - `loseLock(id)`: like a lock file removed by hand under the JSONL backend: every append
 *   rejects `E_LOCKED` until the session is closed and loaded again;
 * - `holdLock(id)` / `releaseLock(id)`: another instance holds the lock (load and append reject `E_LOCKED`);
 * - `failAppends(id)` / `healAppends(id)`: appends reject `E_IO` (a full disk) meanwhile;
 * - `failClose(id)`: the next close rejects (after really closing);
 * - `pauseAppends(id)`: appends wait (in flight) until the returned function is called.
 */
export function scriptedBackend<P extends SessionPersistence>(inner: P) {
  const calls: BackendCall[] = []
  const lost = new Set<string>()
  const held = new Set<string>()
  const closeFaults = new Set<string>()
  const failingAppends = new Set<string>()
  const paused = new Map<string, Promise<void>>()
  const starters: { match: (c: Omit<BackendCall, 'outcome'>) => boolean; resolve: () => void }[] = []
  const waiters: { match: (c: BackendCall) => boolean; resolve: (c: BackendCall) => void }[] = []
  const locked = (id: string) => new SessionPersistenceError('E_LOCKED', `session '${id}': lock lost or held elsewhere`, { sessionId: id })

  function record(call: BackendCall): void {
    calls.push(call)
    for (const w of waiters.splice(0)) (w.match(call) ? w.resolve(call) : waiters.push(w))
  }
  async function settle<T>(call: Omit<BackendCall, 'outcome'>, run: () => Promise<T>): Promise<T> {
    for (const w of starters.splice(0)) (w.match(call) ? w.resolve() : starters.push(w))
    try {
      const result = await run()
      record({ ...call, outcome: 'ok' })
      return result
    } catch (err) {
      record({ ...call, outcome: isSessionPersistenceError(err) ? err.code : 'foreign' })
      throw err
    }
  }

  const backend = new Proxy(inner, {
    get(target, prop) {
      switch (prop) {
        case 'create':
          return (meta: SessionMeta) => settle({ op: 'create', id: meta.id }, () => target.create(meta))
        case 'append':
          return (id: string, events: readonly SessionEvent[]) =>
            settle({ op: 'append', id, seqs: events.map((e) => e.seq) }, async () => {
              if (lost.has(id) || held.has(id)) throw locked(id)
              await paused.get(id)
              if (failingAppends.has(id)) throw new SessionPersistenceError('E_IO', `session '${id}': disk full (injected)`, { sessionId: id })
              return target.append(id, events)
            })
        case 'load':
          return (id: string, options?: LoadOptions) =>
            settle({ op: 'load', id, options }, async () => {
              if (held.has(id)) throw locked(id)
              const loaded = await target.load(id, options)
              lost.delete(id)
              return loaded
            })
        case 'close':
          return (id: string) =>
            settle({ op: 'close', id }, async () => {
              await target.close(id)
              if (closeFaults.delete(id)) throw new Error(`close of '${id}' failed (injected)`)
            })
      }
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? value.bind(target) : value
    },
  })

  return {
    backend,
    calls,
    /** Resolves with the first call recorded from now on that matches. */
    next(match: (c: BackendCall) => boolean): Promise<BackendCall> {
      return new Promise((resolve) => waiters.push({ match, resolve }))
    },
    loseLock: (id: string) => void lost.add(id),
    holdLock: (id: string) => void held.add(id),
    releaseLock: (id: string) => void held.delete(id),
    failClose: (id: string) => void closeFaults.add(id),
    /** Resolves when a matching call starts (it is then in flight). */
    nextStart(match: (c: Omit<BackendCall, 'outcome'>) => boolean): Promise<void> {
      return new Promise((resolve) => starters.push({ match, resolve }))
    },
    pauseAppends(id: string): () => void {
      let release = () => {}
      paused.set(id, new Promise<void>((resolve) => (release = resolve)))
      return () => {
        paused.delete(id)
        release()
      }
    },
    failAppends: (id: string) => void failingAppends.add(id),
    healAppends: (id: string) => void failingAppends.delete(id),
  }
}

/** Resolves with the next error the plugin reports. */
export function nextError(plugin: SessionPersistencePlugin<SessionPersistence>): Promise<SessionPersistenceError> {
  return new Promise((resolve) => plugin.once('error', resolve))
}
