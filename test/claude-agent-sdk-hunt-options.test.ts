// A hunt's find: createSessionStore took option keys it does not know without a word; a misspelt
// idleCloseMs (`idleCloseMS: 0`) kept every session's writer lock for the default 30 s. The core,
// plugin and PostgreSQL configs refuse an unknown key with E_CONFIG naming it; now the store does.
// Needs no Claude binary: the store is exercised directly.
import { readdir } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { createSessionStore } from '../src/adapters/claude-agent-sdk/index.js'
import { codeOf, thrown } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

const K = { projectKey: 'p', sessionId: 's' }

describe('createSessionStore options', () => {
  test('a misspelt idleCloseMs (idleCloseMS) is E_CONFIG naming it; no store, no session, no lock', async () => {
    const root = await tmpRoot()
    const err = thrown(() => createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMS: 0 } as never))
    expect(err.code).toBe('E_CONFIG')
    expect(err.message).toContain('"idleCloseMS"')
    expect(await readdir(root)).toEqual([])
    // Nothing holds the session: two stores spelt right write it one after the other at once.
    const a = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    const b = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    expect(await codeOf(a.append(K, [{ type: 'x', uuid: 'a1' }]))).toBe('resolved')
    expect(await codeOf(b.append(K, [{ type: 'x', uuid: 'b1' }]))).toBe('resolved')
    expect((await a.load(K))?.map((e) => e.uuid)).toEqual(['a1', 'b1'])
    await a.close()
    await b.close()
  })

  test('each unknown key is named, a bad known field too', () => {
    const persistence = createJsonlPersistence({ root: '/nonexistent-never-written' })
    expect(thrown(() => createSessionStore({ persistence, onerror: () => {} } as never)).message).toContain('"onerror"')
    const bad = thrown(() => createSessionStore({ persistence, idleCloseMs: -1 }))
    expect(bad.code).toBe('E_CONFIG')
    expect(bad.message).toContain('idleCloseMs')
  })
})
