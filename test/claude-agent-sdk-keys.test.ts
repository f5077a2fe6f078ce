// How a SessionKey becomes a session id (injective, within SPEC 3.2's 244 encoded bytes, also
// for keys far longer than that), and the inputs the store refuses, with their codes.
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { createSessionStore, type SessionKey } from '../src/adapters/claude-agent-sdk/index.js'
import { sessionIdOf } from '../src/adapters/claude-agent-sdk/session-key.js'
import { encodeSessionId, MAX_ENCODED_ID_BYTES } from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { jsonlBackend } from './helpers/claude-agent-sdk-backends.js'
import { codeOf } from './helpers/codes.js'

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

const keyArb = fc.record(
  {
    projectKey: fc.string({ minLength: 1, maxLength: 400, unit: 'grapheme' }),
    sessionId: fc.string({ minLength: 1, maxLength: 300, unit: 'grapheme' }),
    subpath: fc.string({ minLength: 1, maxLength: 300, unit: 'grapheme' }),
  },
  { requiredKeys: ['projectKey', 'sessionId'] },
)
const tag = (k: SessionKey) => JSON.stringify([k.projectKey, k.sessionId, k.subpath ?? null])

describe('session ids of keys', () => {
  it('are valid ids of SPEC 3.2 for any key, however long', () => {
    fc.assert(
      fc.property(keyArb, (k) => {
        expect(encodeSessionId(sessionIdOf(k)).length).toBeLessThanOrEqual(MAX_ENCODED_ID_BYTES)
      }),
      { numRuns: 500 },
    )
  })

  it('differ for different keys, including keys built to collide through the separators', () => {
    const tricky: SessionKey[] = [
      { projectKey: 'p', sessionId: 'a/b' },
      { projectKey: 'p', sessionId: 'a', subpath: 'b' },
      { projectKey: 'p', sessionId: 'a@b' },
      { projectKey: 'p', sessionId: 'a', subpath: '@b' },
      { projectKey: 'p', sessionId: 'a%2Fb' },
      { projectKey: 'p', sessionId: 'a#b' },
      { projectKey: 'p', sessionId: 'a', subpath: 'b/c' },
      { projectKey: 'p', sessionId: 'a/b', subpath: 'c' },
      { projectKey: 'p/a', sessionId: 'b' },
      { projectKey: 'P', sessionId: 'a' },
      { projectKey: 'p', sessionId: 'A' },
      { projectKey: 'p', sessionId: 'a' },
      { projectKey: 'p', sessionId: 'x'.repeat(300) },
      { projectKey: 'p', sessionId: 'x'.repeat(301) },
      { projectKey: 'p', sessionId: 'x'.repeat(300), subpath: 'y' },
    ]
    expect(new Set(tricky.map(sessionIdOf)).size).toBe(tricky.length)
    fc.assert(
      fc.property(fc.uniqueArray(keyArb, { minLength: 2, maxLength: 20, selector: tag }), (keys) => {
        expect(new Set(keys.map(sessionIdOf)).size).toBe(keys.length)
      }),
      { numRuns: 300 },
    )
  })

  it('start with the SDK session id when the key fits, so `session-jsonl show <uuid prefix>` finds it', () => {
    const sessionId = '8c3e1f7a-1b2c-4d5e-8f90-0123456789ab'
    expect(sessionIdOf({ projectKey: '-home-me-project', sessionId })).toMatch(/^8c3e1f7a-1b2c-4d5e-8f90-0123456789ab@[0-9a-f]{16}$/)
    expect(sessionIdOf({ projectKey: '-home-me-project', sessionId, subpath: 'subagents/agent-a1' })).toMatch(
      /^8c3e1f7a-1b2c-4d5e-8f90-0123456789ab\/subagents\/agent-a1@[0-9a-f]{16}$/,
    )
  })

  it('round-trip long and unusual keys through the JSONL backend', async () => {
    const b = await jsonlBackend()
    cleanups.push(b.cleanup)
    const store = createSessionStore({ persistence: b.persistence })
    cleanups.push(() => store.close())
    const keys: SessionKey[] = [
      { projectKey: `-Users-Émile-${'Deep-Project-'.repeat(30)}`, sessionId: '8c3e1f7a-1b2c-4d5e-8f90-0123456789ab' },
      { projectKey: 'tenant/42', sessionId: 'Ünïcødé 🙂 '.repeat(30), subpath: `subagents/${'agent-'.repeat(60)}` },
      { projectKey: 'tenant/42', sessionId: '..', subpath: '../../etc/passwd' },
      { projectKey: '%', sessionId: '%2F', subpath: '#@%' },
    ]
    for (const [i, k] of keys.entries()) await store.append(k, [{ type: 'user', uuid: `u${i}`, n: i }])
    for (const [i, k] of keys.entries()) expect(await store.load(k)).toEqual([{ type: 'user', uuid: `u${i}`, n: i }])
    expect((await store.listSubkeys({ projectKey: 'tenant/42', sessionId: '..' }))).toEqual(['../../etc/passwd'])
    // Every log lies inside the root, under a name of its own.
    expect((await b.persistence.list()).map((l) => l.location.kind === 'jsonl' && l.location.path.startsWith(`${b.root}/`))).toEqual(keys.map(() => true))
  })
})

describe('inputs the store refuses', () => {
  const store = () => {
    const s = createSessionStore({ persistence: createMemoryPersistence(), onError: () => {} })
    cleanups.push(() => s.close())
    return s
  }
  const ok = { projectKey: 'p', sessionId: 's' }

  it('a key with a missing, empty or non-string part, an empty subpath, or a lone surrogate: E_INVALID_ID', async () => {
    const s = store()
    const bad: unknown[] = [
      null,
      'p/s',
      [],
      {},
      { projectKey: '', sessionId: 's' },
      { projectKey: 'p', sessionId: '' },
      { projectKey: 'p', sessionId: 's', subpath: '' },
      { projectKey: 'p', sessionId: 42 },
      { projectKey: 'p', sessionId: 's', subpath: null },
      { projectKey: 'p', sessionId: '\uD800' },
    ]
    for (const k of bad) {
      expect(await codeOf(s.append(k as SessionKey, [{ type: 'user' }]))).toBe('E_INVALID_ID')
      expect(await codeOf(s.load(k as SessionKey))).toBe('E_INVALID_ID')
      expect(await codeOf(s.delete(k as SessionKey))).toBe('E_INVALID_ID')
    }
    for (const p of ['', null, 7]) {
      expect(await codeOf(s.listSessions(p as string))).toBe('E_INVALID_ID')
      expect(await codeOf(s.listSubkeys({ projectKey: p as string, sessionId: 's' }))).toBe('E_INVALID_ID')
    }
    expect(await codeOf(s.listSubkeys(null as unknown as SessionKey))).toBe('E_INVALID_ID')
  })

  it('entries that are not an array of plain objects: E_INVALID_EVENT, and nothing is written', async () => {
    const s = store()
    class Entry {
      type = 'user'
    }
    for (const entries of [null, 'x', { type: 'user' }]) {
      expect(await codeOf(s.append(ok, entries as never))).toBe('E_INVALID_EVENT')
    }
    for (const bad of [null, 1, 'user', [{ type: 'user' }], new Entry(), new Map()]) {
      expect(await codeOf(s.append(ok, [{ type: 'user', uuid: 'a' }, bad as never]))).toBe('E_INVALID_EVENT')
    }
    expect(await s.load(ok)).toBeNull()
  })

  it('options that are not valid: E_CONFIG', () => {
    const persistence = createMemoryPersistence()
    for (const options of [undefined, null, {}, { persistence: {} }, { persistence, idleCloseMs: -1 }, { persistence, idleCloseMs: 1.5 }, { persistence, onError: 1 }, { persistence, now: 'x' }]) {
      let code = 'none'
      try {
        createSessionStore(options as never)
      } catch (err) {
        code = (err as { code: string }).code
      }
      expect(code).toBe('E_CONFIG')
    }
  })
})
