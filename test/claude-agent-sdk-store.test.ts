// What the store adds to the SDK's contracts, over each backend: uuid de-duplication (also
// across a restart), the SDK's retry, one writer per session, the lock released when idle.
import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { createSessionStore, type ClaudeSessionStore, type SessionStoreEntry } from '../src/adapters/claude-agent-sdk/index.js'
import { sessionIdOf } from '../src/adapters/claude-agent-sdk/session-key.js'
import { SessionPersistenceError } from '../src/errors.js'
import type { SessionPersistence } from '../src/persistence.js'
import { type Backend, type BackendFactory, jsonlBackend, memoryBackend, postgresBackend } from './helpers/claude-agent-sdk-backends.js'
import { codeOf, rejection } from './helpers/codes.js'
import { pgUrl } from './helpers/pg-env.js'

const entry = (n: number, extra: Record<string, unknown> = {}): SessionStoreEntry => ({
  type: 'user',
  uuid: `uuid-${n}`,
  message: { role: 'user', content: `prompt ${n}` },
  ...extra,
})
const uuids = (entries: SessionStoreEntry[] | null) => (entries ?? []).map((e) => e.uuid ?? `(${e.type})`)
const key = { projectKey: '-work-app', sessionId: '8c3e1f7a-0000-4000-8000-000000000001' }

/** A persistence whose appends fail after `failNext(n)`: before writing anything, or after the batch was stored. */
function failingAppends(inner: SessionPersistence, when: 'before-write' | 'after-write'): SessionPersistence & { attempts: number; failNext(n: number): void } {
  let left = 0
  const wrapped = Object.create(inner) as SessionPersistence & { attempts: number; failNext(n: number): void }
  wrapped.attempts = 0
  wrapped.failNext = (n) => {
    left = n
  }
  wrapped.append = async (id, events) => {
    wrapped.attempts++
    if (left > 0) {
      left--
      if (when === 'after-write') await inner.append(id, events)
      throw new SessionPersistenceError('E_IO', 'injected append failure', { sessionId: id })
    }
    return inner.append(id, events)
  }
  for (const m of ['create', 'load', 'inspect', 'list', 'delete', 'close', 'locate'] as const) {
    ;(wrapped as unknown as Record<string, unknown>)[m] = (inner[m] as (...a: unknown[]) => unknown).bind(inner)
  }
  return wrapped
}

function suite(name: string, factory: BackendFactory): void {
  describe(`the store over ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = []
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c()
    })
    const backend = async (): Promise<Backend> => {
      const b = await factory()
      cleanups.push(b.cleanup)
      return b
    }
    const storeOn = (persistence: SessionPersistence, options: { idleCloseMs?: number; onError?: (e: unknown) => void } = {}): ClaudeSessionStore => {
      const store = createSessionStore({ persistence, onError: () => {}, ...options })
      cleanups.push(() => store.close())
      return store
    }

    it('stores an entry whose uuid it already holds once: a repeated batch, a repeat inside a batch', async () => {
      const store = storeOn((await backend()).persistence)
      await store.append(key, [entry(1), entry(2)])
      await store.append(key, [entry(1), entry(2)])
      await store.append(key, [entry(2), entry(3), entry(3, { changed: true })])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3'])
      // The first copy is the one kept.
      expect((await store.load(key))?.[2]).toEqual(entry(3))
    })

    it('stores entries without a uuid every time (the SDK says: append them without dedup)', async () => {
      const store = storeOn((await backend()).persistence)
      const mode = { type: 'mode', mode: 'default' }
      await store.append(key, [mode, entry(1)])
      await store.append(key, [mode])
      expect(uuids(await store.load(key))).toEqual(['(mode)', 'uuid-1', '(mode)'])
    })

    it('de-duplicates across a restart: a new store on the same storage learns the stored uuids from the log', async () => {
      const b = await backend()
      const first = storeOn(b.persistence)
      await first.append(key, [entry(1), entry(2)])
      await first.close()
      const second = storeOn(b.another())
      // importSessionToStore replays, an SDK retry after a crash: the same entries again.
      await second.append(key, [entry(1), entry(2), entry(3)])
      expect(uuids(await second.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3'])
    })

    it('an entry that is not a plain object, in a batch to an open session: E_INVALID_EVENT, nothing of the batch written or remembered, not reported', async () => {
      const b = await backend()
      const reported: unknown[] = []
      const store = storeOn(b.persistence, { onError: (e) => reported.push(e) })
      await store.append(key, [entry(1)])
      for (const bad of [null, 7, [entry(9)], new Map()]) {
        const err = await rejection(store.append(key, [entry(2), entry(2), bad as never, entry(3)]))
        expect(err.code).toBe('E_INVALID_EVENT')
        expect(err.message).toContain('entry 2 of the batch')
      }
      expect(reported).toEqual([])
      // The refused batch's uuids were not kept: the same entries, valid, are stored.
      await store.append(key, [entry(2), entry(3)])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3'])
    })

    it('captures the batch at the call: entries changed right after append() are stored as they were, uuid included (first append, queued append, open session)', async () => {
      const store = storeOn((await backend()).persistence)
      // Changes what the caller passed in every way it can: a nested field, the uuid, the array.
      const spoil = (batch: SessionStoreEntry[]) => {
        for (const e of batch) {
          ;(e.message as { content: string }).content = 'MUTATED'
          e.uuid = 'changed'
        }
        batch.push(entry(99))
      }
      // The first append of a key: the session is opened (created) before anything is written.
      const first = [entry(1), entry(2)]
      const p1 = store.append(key, first)
      spoil(first)
      // Queued behind the first: it reaches the backend only after the open and that write.
      const queued = [entry(3)]
      const p2 = store.append(key, queued)
      spoil(queued)
      await Promise.all([p1, p2])
      // The session open and nothing queued.
      const later = [entry(4)]
      const p3 = store.append(key, later)
      spoil(later)
      await p3
      expect(await store.load(key)).toEqual([entry(1), entry(2), entry(3), entry(4)])
      // The uuids remembered are the ones stored: the entries again are not stored twice.
      await store.append(key, [entry(1), entry(3), entry(4)])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3', 'uuid-4'])
    })

    it('the captured batch is refused as the entries would be: E_NOT_JSON at the path on a first append and on a queued one, nothing of the batch stored', async () => {
      const store = storeOn((await backend()).persistence)
      class Point {
        x = 1
      }
      const cyclic: Record<string, unknown> = { type: 'user', uuid: 'c' }
      cyclic.self = cyclic
      const bads: Record<string, unknown>[] = [
        { type: 'user', uuid: 'x', fn: () => 1 },
        { type: 'user', uuid: 'x', s: Symbol('s') },
        { type: 'user', uuid: 'x', message: { content: [new Point()] } },
        { type: 'user', uuid: 'x', when: new Date(0) },
        { type: 'user', uuid: 'x', big: 10n },
        cyclic,
      ]
      for (const [i, bad] of bads.entries()) {
        const k = { ...key, sessionId: `not-json-${i}` }
        const err = await rejection(store.append(k, [entry(1), bad as SessionStoreEntry]))
        expect([err.code, err.message.includes('claudeEntry')]).toEqual(['E_NOT_JSON', true])
        const ahead = store.append(k, [entry(2)])
        const queued = rejection(store.append(k, [entry(3), bad as SessionStoreEntry]))
        await ahead
        expect((await queued).code).toBe('E_NOT_JSON')
        expect(uuids(await store.load(k))).toEqual(['uuid-2'])
      }
    })

    it('appends to several keys in turn, each to its own session (other keys, subpaths, an equal key object each time)', async () => {
      const store = storeOn((await backend()).persistence)
      const other = { ...key, sessionId: 'another' }
      const sub = { ...key, subpath: 'subagents/agent-1' }
      for (let n = 1; n <= 3; n++) {
        await store.append({ ...key }, [entry(n)])
        await store.append(other, [entry(10 + n)])
        await store.append(sub, [entry(20 + n)])
      }
      // A key changed in place after an append is another key.
      const moving: { projectKey: string; sessionId: string; subpath?: string } = { ...key }
      await store.append(moving, [entry(4)])
      moving.subpath = 'subagents/agent-2'
      await store.append(moving, [entry(30)])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3', 'uuid-4'])
      expect(uuids(await store.load(other))).toEqual(['uuid-11', 'uuid-12', 'uuid-13'])
      expect(uuids(await store.load(sub))).toEqual(['uuid-21', 'uuid-22', 'uuid-23'])
      expect(uuids(await store.load({ ...key, subpath: 'subagents/agent-2' }))).toEqual(['uuid-30'])
      // A key whose part is no longer valid is refused, whatever came before.
      expect(await codeOf(store.append({ ...key, subpath: '' }, [entry(5)]))).toBe('E_INVALID_ID')
    })

    it('append([]) writes nothing: no session appears and the key loads null', async () => {
      const b = await backend()
      const store = storeOn(b.persistence)
      await store.append(key, [])
      await store.append({ ...key, subpath: 'subagents/agent-1' }, [])
      expect(await b.persistence.list()).toEqual([])
      expect(await store.load(key)).toBeNull()
    })

    it('an append that fails twice before writing, then succeeds, stores each entry once', async () => {
      const b = await backend()
      const persistence = failingAppends(b.persistence, 'before-write')
      const store = storeOn(persistence)
      await store.append(key, [entry(1)])
      persistence.failNext(2)
      const batch = [entry(2), entry(3)]
      // What the SDK does with a rejected append: retry it, three attempts in all.
      expect(await codeOf(store.append(key, batch))).toBe('E_IO')
      expect(await codeOf(store.append(key, batch))).toBe('E_IO')
      await store.append(key, batch)
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3'])
      expect(persistence.attempts).toBe(4)
    })

    it('an append stored but reported failed twice (an unknown outcome), then retried, stores each entry once', async () => {
      const b = await backend()
      const persistence = failingAppends(b.persistence, 'after-write')
      const store = storeOn(persistence)
      persistence.failNext(2)
      const batch = [entry(1), entry(2)]
      expect(await codeOf(store.append(key, batch))).toBe('E_IO')
      expect(await codeOf(store.append(key, [...batch, entry(3)]))).toBe('E_IO')
      await store.append(key, [...batch, entry(3)])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3'])
    })

    it('one writer per session: a second store on the same storage gets E_LOCKED on append, as a rejection and through onError', async () => {
      const b = await backend()
      const first = storeOn(b.persistence)
      const reported: unknown[] = []
      const second = storeOn(b.another(), { onError: (e) => reported.push(e) })
      await first.append(key, [entry(1)])
      const err = await rejection(second.append(key, [entry(2)]))
      expect(err.code).toBe('E_LOCKED')
      expect(err.message).toMatch(/^E_LOCKED: Claude Agent SDK session -work-app\/8c3e1f7a/)
      expect((err.cause as { code?: string }).code).toBe('E_LOCKED')
      expect(reported).toEqual([err])
      // Readers take no lock: the second store still loads the session.
      expect(uuids(await second.load(key))).toEqual(['uuid-1'])
      // Other sessions are not held.
      await second.append({ ...key, sessionId: 'another' }, [entry(3)])
      // Once the first releases it, the second writes it, learning what is stored.
      await first.close()
      await second.append(key, [entry(1), entry(2)])
      expect(uuids(await first.load(key))).toEqual(['uuid-1', 'uuid-2'])
    })

    it('releases a session after idleCloseMs without appends, so another host can resume it', async () => {
      const b = await backend()
      // An idle time that a loaded machine's PostgreSQL round trips fit well inside (with 50 ms
      // the first store had let go before the second asked, in 2 of 4 runs under load), and a
      // wait for the release itself instead of a fixed sleep.
      const first = storeOn(b.persistence, { idleCloseMs: 1_000 })
      const second = storeOn(b.another(), { idleCloseMs: 60_000 })
      await first.append(key, [entry(1)])
      expect(await codeOf(second.append(key, [entry(2)]))).toBe('E_LOCKED')
      let resumed = await codeOf(second.append(key, [entry(2)]))
      for (let i = 0; i < 300 && resumed === 'E_LOCKED'; i++) {
        await sleep(50)
        resumed = await codeOf(second.append(key, [entry(2)]))
      }
      expect(resumed).toBe('resolved')
      // Now the second holds it: the first, coming back, is refused and writes nothing.
      expect(await codeOf(first.append(key, [entry(3)]))).toBe('E_LOCKED')
      expect(uuids(await first.load(key))).toEqual(['uuid-1', 'uuid-2'])
    })

    it('keeps a busy session open: appends within idleCloseMs keep the lock', async () => {
      const b = await backend()
      // Four appends 300 ms apart outlast one idle time of 1 s (without the appends' renewals
      // the last look would find the session free), and each look comes 700 ms before the
      // idle close is due (it was 200 ms, which one slow PostgreSQL round trip can use up).
      const first = storeOn(b.persistence, { idleCloseMs: 1_000 })
      const second = storeOn(b.another())
      for (let i = 1; i <= 4; i++) {
        await first.append(key, [entry(i)])
        await sleep(300)
        expect(await codeOf(second.append(key, [entry(100 + i)]))).toBe('E_LOCKED')
      }
      expect(uuids(await second.load(key))).toEqual(['uuid-1', 'uuid-2', 'uuid-3', 'uuid-4'])
    })

    it('refuses a session stored under its id that holds another key (E_EXISTS), reading and writing nothing', async () => {
      const b = await backend()
      const id = sessionIdOf(key)
      await b.persistence.create({ id, createdAt: 1, delegationDepth: 0 })
      await b.persistence.append(id, [{ seq: 0, type: 'user/message', time: 1, data: { content: 'not from a store' } }])
      await b.persistence.close(id)
      const store = storeOn(b.persistence)
      expect(await codeOf(store.load(key))).toBe('E_EXISTS')
      expect(await codeOf(store.append(key, [entry(1)]))).toBe('E_EXISTS')
      expect((await b.persistence.inspect(id)).events).toHaveLength(1)
    })

    it('refuses entries that are not plain JSON (E_NOT_JSON, naming the path) and writes nothing of the batch', async () => {
      const b = await backend()
      const store = storeOn(b.persistence)
      await store.append(key, [entry(1)])
      const cyclic: Record<string, unknown> = { type: 'user', uuid: 'c' }
      cyclic.self = cyclic
      for (const bad of [
        { type: 'user', uuid: 'x', big: 10n },
        { type: 'user', uuid: 'x', when: new Date(0) },
        { type: 'user', uuid: 'x', fn: () => 1 },
        { type: 'user', uuid: 'x', n: Number.NaN },
        cyclic,
      ]) {
        const err = await rejection(store.append(key, [entry(2), bad as SessionStoreEntry]))
        expect(err.code).toBe('E_NOT_JSON')
        expect(err.message).toContain('claudeEntry')
      }
      // A refused batch leaves the session open and usable: the next batch is stored.
      await store.append(key, [entry(2)])
      expect(uuids(await store.load(key))).toEqual(['uuid-1', 'uuid-2'])
    })
  })
}

suite('the JSONL backend', jsonlBackend)
suite('the in-memory backend', memoryBackend)
const url = pgUrl()
if (url) suite('PostgreSQL', postgresBackend(url))

describe('listSessions', () => {
  it('gives mtime as integer epoch ms, floored as the SDK asks (1000.7 is 1000, not 1001)', async () => {
    const b = await memoryBackend()
    const store = createSessionStore({ persistence: b.persistence, onError: () => {} })
    try {
      await store.append(key, [entry(1)])
      const listed = await b.persistence.list()
      // A backend whose write times are fractional (a file system's mtimeMs is).
      b.persistence.list = async () => listed.map((l) => ({ ...l, mtimeMs: 1000.7 }))
      expect(await store.listSessions(key.projectKey)).toEqual([{ sessionId: key.sessionId, mtime: 1000 }])
    } finally {
      await store.close()
      await b.cleanup()
    }
  })
})
