// A delete of a key keeps its place in call order among the operations on that key and, for a
// main key, on its subkeys: what was called before it is gone after it, what was called after it
// is kept (an append resolves when durable, SPEC §14), a load called after it sees the state after
// it. The oracle is the same store given the same calls one by one, each awaited.
import { afterEach, describe, expect, it } from 'vitest'
import { createSessionStore, type ClaudeSessionStore, type SessionKey, type SessionStoreEntry } from '../src/adapters/claude-agent-sdk/index.js'
import { isSessionPersistenceError } from '../src/errors.js'
import type { SessionPersistence } from '../src/persistence.js'
import { type Backend, type BackendFactory, jsonlBackend, memoryBackend, postgresBackend } from './helpers/claude-agent-sdk-backends.js'
import { pgUrl } from './helpers/pg-env.js'

const project = '-work-app'
const M: SessionKey = { projectKey: project, sessionId: 'main-1' }
const A: SessionKey = { ...M, subpath: 'subagents/agent-a' }
const B: SessionKey = { ...M, subpath: 'subagents/agent-b' }
// A subkey the prelude does not store: its first append creates its session.
const C: SessionKey = { ...M, subpath: 'subagents/agent-c' }
// Another session of the project, with a subkey: a delete of M never touches them.
const N: SessionKey = { projectKey: project, sessionId: 'main-2' }
const NA: SessionKey = { ...N, subpath: 'subagents/agent-a' }
const KEYS = { M, A, B, C, N, NA } as const
type KeyName = keyof typeof KEYS

type Op = { append: KeyName; uuid: string } | { delete: KeyName } | { load: KeyName }

const entry = (uuid: string): SessionStoreEntry => ({ type: 'user', uuid, message: { role: 'user', content: uuid } })
const uuids = (entries: SessionStoreEntry[] | null) => (entries === null ? null : entries.map((e) => e.uuid))

/** Each operation's outcome: 'resolved', a load's uuids, or the error code it rejected with. */
type Outcome = string | (string | undefined)[] | null

function call(store: ClaudeSessionStore, op: Op): Promise<Outcome> {
  const p: Promise<Outcome> =
    'append' in op
      ? store.append(KEYS[op.append], [entry(op.uuid)]).then(() => 'resolved')
      : 'delete' in op
        ? store.delete(KEYS[op.delete]).then(() => 'resolved')
        : store.load(KEYS[op.load]).then(uuids)
  return p.catch((err: unknown) => (isSessionPersistenceError(err) ? err.code : `foreign: ${String(err)}`))
}

/** What a reader sees once everything settled. */
async function state(store: ClaudeSessionStore) {
  const loads: Record<string, Outcome> = {}
  for (const name of Object.keys(KEYS) as KeyName[]) loads[name] = uuids(await store.load(KEYS[name]))
  return {
    loads,
    subkeysOfM: await store.listSubkeys(M),
    subkeysOfN: await store.listSubkeys(N),
    sessions: (await store.listSessions(project)).map((s) => s.sessionId).sort(),
  }
}

/** How the stored state is before the operations: written by this store (open), or by an earlier one (closed). */
type Prelude = 'open in this store' | 'stored by an earlier store'
const PRELUDE: [KeyName, string][] = [
  ['M', 'm0'],
  ['A', 'a0'],
  ['B', 'b0'],
  ['N', 'n0'],
  ['NA', 'na0'],
]

function suite(name: string, factory: BackendFactory, randomSequences: number): void {
  describe(`delete in call order, over ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = []
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c()
    })
    const backend = async (): Promise<Backend> => {
      const b = await factory()
      cleanups.push(b.cleanup)
      return b
    }

    /** The store after the prelude, over a fresh backend. */
    async function prepared(prelude: Prelude, idleCloseMs: number | undefined): Promise<ClaudeSessionStore> {
      const { persistence } = await backend()
      const open = (p: SessionPersistence) => {
        const s = createSessionStore({ persistence: p, onError: () => {}, ...(idleCloseMs === undefined ? {} : { idleCloseMs }) })
        cleanups.push(() => s.close())
        return s
      }
      let store = open(persistence)
      for (const [k, uuid] of PRELUDE) await store.append(KEYS[k], [entry(uuid)])
      if (prelude === 'stored by an earlier store') {
        await store.close()
        store = open(persistence)
      }
      return store
    }

    /** The operations called in one tick, unawaited, against the same operations awaited one by one. */
    async function check(ops: Op[]): Promise<void> {
      for (const prelude of ['open in this store', 'stored by an earlier store'] as const) {
        for (const idleCloseMs of [undefined, 0]) {
          const expected = await prepared(prelude, idleCloseMs)
          const one: Outcome[] = []
          for (const op of ops) one.push(await call(expected, op))
          const actual = await prepared(prelude, idleCloseMs)
          const all = await Promise.all(ops.map((op) => call(actual, op)))
          const where = { prelude, idleCloseMs: idleCloseMs ?? 'default', ops: JSON.stringify(ops) }
          expect({ ...where, outcomes: all }).toEqual({ ...where, outcomes: one })
          expect({ ...where, state: await state(actual) }).toEqual({ ...where, state: await state(expected) })
        }
      }
    }

    it('an append called after a delete of its key is kept (it was acknowledged, then deleted)', async () => {
      await check([{ delete: 'M' }, { append: 'M', uuid: 'new' }])
      await check([{ delete: 'A' }, { append: 'A', uuid: 'new' }])
    })

    it('an append to a subkey called before the delete of its main key is deleted with it (it survived)', async () => {
      // A subkey nothing stored before: it reaches the disk only after the delete listed the subkeys.
      await check([{ append: 'C', uuid: 'c1' }, { delete: 'M' }])
      await check([{ append: 'NA', uuid: 'x' }, { append: 'M', uuid: 'm1' }, { append: 'A', uuid: 'a1' }, { append: 'C', uuid: 'c1' }, { delete: 'M' }])
      await check([{ append: 'A', uuid: 'a1' }, { delete: 'M' }])
    })

    it('a delete of a main key between appends to it and its subkeys: before are gone, after are kept', async () => {
      await check([
        { append: 'M', uuid: 'm1' },
        { append: 'A', uuid: 'a1' },
        { delete: 'M' },
        { append: 'M', uuid: 'm2' },
        { append: 'B', uuid: 'b2' },
        { append: 'C', uuid: 'c2' },
        { load: 'M' },
        { load: 'C' },
        { load: 'A' },
        { load: 'B' },
      ])
    })

    it('loads see the state at their place: before the delete the stored entries, after it the state after it', async () => {
      await check([{ load: 'M' }, { load: 'A' }, { delete: 'M' }, { load: 'M' }, { load: 'A' }, { load: 'B' }, { load: 'N' }])
      await check([{ append: 'A', uuid: 'a1' }, { load: 'A' }, { delete: 'M' }, { load: 'A' }, { append: 'A', uuid: 'a2' }, { load: 'A' }])
    })

    it('deletes one after another among appends: each takes what was called before it', async () => {
      await check([
        { append: 'M', uuid: 'm1' },
        { delete: 'M' },
        { append: 'M', uuid: 'm2' },
        { append: 'A', uuid: 'a2' },
        { delete: 'M' },
        { append: 'A', uuid: 'a3' },
        { delete: 'M' },
        { delete: 'M' },
        { append: 'M', uuid: 'm3' },
      ])
      await check([{ append: 'A', uuid: 'a1' }, { delete: 'A' }, { append: 'A', uuid: 'a2' }, { delete: 'M' }, { append: 'B', uuid: 'b1' }, { delete: 'B' }, { load: 'B' }])
      await check([{ delete: 'M' }, { delete: 'A' }, { append: 'A', uuid: 'a1' }, { delete: 'M' }, { load: 'A' }, { append: 'M', uuid: 'm1' }])
    })

    it('a delete of a subkey or of another session leaves the rest in call order', async () => {
      await check([{ append: 'M', uuid: 'm1' }, { delete: 'A' }, { append: 'N', uuid: 'n1' }, { delete: 'N' }, { append: 'NA', uuid: 'na1' }, { load: 'M' }, { load: 'NA' }])
    })

    it('a delete that fails (a subkey another instance writes: E_LOCKED) lets the operations called after it run', async () => {
      const b = await backend()
      const store = createSessionStore({ persistence: b.persistence, onError: () => {} })
      cleanups.push(() => store.close())
      const other = createSessionStore({ persistence: b.another(), onError: () => {} })
      cleanups.push(() => other.close())
      await store.append(M, [entry('m0')])
      await other.append(A, [entry('a0')]) // held by the other instance
      const outcomes = await Promise.all([call(store, { delete: 'M' }), call(store, { append: 'M', uuid: 'm1' }), call(store, { load: 'M' }), call(store, { append: 'C', uuid: 'c1' })])
      // Subkeys go first: the locked one stops the delete before the main transcript.
      expect(outcomes).toEqual(['E_LOCKED', 'resolved', ['m0', 'm1'], 'resolved'])
      await other.close()
      expect(await state(store)).toMatchObject({ loads: { M: ['m0', 'm1'], A: ['a0'], C: ['c1'] }, subkeysOfM: ['subagents/agent-a', 'subagents/agent-c'] })
    })

    it('random sequences of appends, deletes and loads on a main key, its subkeys and another session', async () => {
      // A fixed seed: the same sequences every run.
      let seed = 0x2f6b_91d3
      const next = (n: number) => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
        return (seed >>> 8) % n
      }
      const names = Object.keys(KEYS) as KeyName[]
      for (let s = 0; s < randomSequences; s++) {
        const ops: Op[] = []
        for (let i = 0; i < 8; i++) {
          const k = names[next(names.length)]!
          const kind = next(5)
          ops.push(kind < 2 ? { append: k, uuid: `${k}-${s}-${i}` } : kind < 4 ? { delete: next(2) === 0 ? 'M' : k } : { load: k })
        }
        await check(ops)
      }
    })
  })
}

suite('the JSONL backend', jsonlBackend, 12)
suite('the in-memory backend', memoryBackend, 12)
const url = pgUrl()
// Fewer random sequences: each costs a round trip per call, eight runs per sequence.
if (url) suite('PostgreSQL', postgresBackend(url), 4)
