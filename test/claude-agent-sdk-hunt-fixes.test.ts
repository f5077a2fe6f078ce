import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, SessionPersistenceCorruptionError } from '../src/index.js'
import { createSessionStore, sessionIdOf } from '../src/adapters/claude-agent-sdk/index.js'
import { createFaultInjectingFileSystem, createMemoryPersistence } from '../src/testing/index.js'
import { readFile, writeFile } from 'node:fs/promises'
import { tmpRoot } from './helpers/tmp-root.js'

// Five defects a read-only hunt found in the Claude Agent SDK store (each failed before).

const K = { projectKey: 'p', sessionId: 's' }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : `not a package error: ${String(err)}`
  }
}

describe('Claude Agent SDK store: what the hunt found', () => {
  test('reads do not keep the lock: a session only read after its last append is released idleCloseMs after that append', async () => {
    const root = await tmpRoot()
    const a = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 300, onError: () => {} })
    const b = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 300, onError: () => {} })
    await a.append(K, [{ type: 'x', uuid: 'a1' }])
    expect(await codeOf(b.append(K, [{ type: 'x', uuid: 'b0' }]))).toBe('E_LOCKED')
    // A keeps reading (a picker, a transcript view) every 50 ms for 3 s; B may append once A's idle time has passed.
    let got = 'E_LOCKED'
    for (let t = 0; t < 3000 && got === 'E_LOCKED'; t += 50) {
      await sleep(50)
      expect(await a.load(K)).not.toBeNull()
      if (t >= 400) got = await codeOf(b.append(K, [{ type: 'x', uuid: `b${t}` }]))
    }
    expect(got).toBe('resolved')
    await a.close()
    await b.close()
  })

  for (const [name, make] of [
    ['memory', async () => createMemoryPersistence()],
    ['JSONL', async () => createJsonlPersistence({ root: await tmpRoot() })],
  ] as const) {
    test(`${name}: delete of a key leaves a session under its id that holds another key (which load and append refuse)`, async () => {
      const p = await make()
      const s = createSessionStore({ persistence: p, onError: () => {} })
      const id = sessionIdOf(K)
      await p.create({ id, createdAt: 1, delegationDepth: 0, claudeAgentSdk: { projectKey: 'other-project', sessionId: 's' } })
      await p.append(id, [{ seq: 0, type: 'user/message', time: 1, data: { content: 'precious' } }])
      await p.close(id)
      expect(await codeOf(s.load(K))).toBe('E_EXISTS')
      await s.delete(K)
      expect((await p.inspect(id)).events.map((e) => e.data)).toEqual([{ content: 'precious' }])
      // and its own session is deleted as before
      const mine = { projectKey: 'p', sessionId: 'mine' }
      await s.append(mine, [{ type: 'x', uuid: 'u1' }])
      await s.delete(mine)
      expect(await s.load(mine)).toBeNull()
      await s.close()
    })
  }

  test('an entry nested too deeply for the copy is E_NOT_JSON, never a RangeError, whether the session is open or not', async () => {
    const s = createSessionStore({ persistence: createMemoryPersistence(), onError: () => {} })
    let deep: unknown = 'leaf'
    for (let i = 0; i < 100_000; i++) deep = [deep]
    expect(await codeOf(s.append(K, [{ type: 'x', deep } as never]))).toBe('E_NOT_JSON')
    await s.append(K, [{ type: 'x', uuid: 'ok' }])
    expect(await codeOf(s.append(K, [{ type: 'x', deep } as never]))).toBe('E_NOT_JSON')
    expect(await s.load(K)).toEqual([{ type: 'x', uuid: 'ok' }])
    await s.close()
  })

  test('idleCloseMs 0: the lock is free when append resolves', async () => {
    const root = await tmpRoot()
    const a = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    const b = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    const codes: string[] = []
    for (let i = 0; i < 10; i++) {
      await a.append(K, [{ type: 'x', uuid: `a${i}` }])
      codes.push(await codeOf(b.append(K, [{ type: 'x', uuid: `b${i}` }])))
    }
    expect(codes).toEqual(Array(10).fill('resolved'))
    expect((await a.load(K))!.map((e) => e.uuid)).toEqual(Array.from({ length: 10 }, (_, i) => [`a${i}`, `b${i}`]).flat())
    await a.close()
    await b.close()
  })

  test("an append's E_CORRUPT stays a SessionPersistenceCorruptionError with its line and byte", async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    const s = createSessionStore({ persistence: p, onError: () => {} })
    await s.append(K, [{ type: 'x', uuid: 'u1' }, { type: 'x', uuid: 'u2' }])
    await s.append(K, [{ type: 'x', uuid: 'u3' }])
    await s.close()
    const path = p.locate({ id: sessionIdOf(K), createdAt: 0, delegationDepth: 0 }).path
    const lines = (await readFile(path, 'utf8')).split('\n')
    lines[2] = 'garbage that is no event'
    await writeFile(path, lines.join('\n'))
    const err = await s.append(K, [{ type: 'x', uuid: 'u4' }]).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
    const c = err as SessionPersistenceCorruptionError
    expect([c.code, c.line, c.byteOffset > 0, c.message]).toEqual(['E_CORRUPT', 3, true, expect.stringMatching(/^E_CORRUPT: Claude Agent SDK session .*line 3/)])
    await s.close()
  })

  test('an append with a load queued behind it still starts the idle time: the session is not closed early', async () => {
    const root = await tmpRoot()
    // The idle time ran from the append before (2 s earlier): the session closed 1 s after the
    // pair below instead of 3 s; at 2 s it must still be held.
    const a = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 3000, onError: () => {} })
    const b = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 3000, onError: () => {} })
    await a.append(K, [{ type: 'x', uuid: 'a0' }])
    await sleep(2000)
    await Promise.all([a.append(K, [{ type: 'x', uuid: 'a1' }]), a.load(K)])
    await sleep(2000)
    expect(await codeOf(b.append(K, [{ type: 'x', uuid: 'b1' }]))).toBe('E_LOCKED')
    await a.close()
    await b.close()
  })

  test('idleCloseMs 0: a refused append frees the lock too, and a close that fails after a durable append goes to onError, the append resolving', async () => {
    const root = await tmpRoot()
    const a = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    const b = createSessionStore({ persistence: createJsonlPersistence({ root }), idleCloseMs: 0, onError: () => {} })
    await a.append(K, [{ type: 'x', uuid: 'a1' }])
    expect(await codeOf(a.append(K, [{ type: 'x', uuid: 'a2', big: 1n } as never]))).toBe('E_NOT_JSON')
    expect(await codeOf(b.append(K, [{ type: 'x', uuid: 'b1' }]))).toBe('resolved')

    const fs = createFaultInjectingFileSystem()
    const errors: string[] = []
    const c = createSessionStore({ persistence: createJsonlPersistence({ root, fs }), idleCloseMs: 0, onError: (err) => errors.push(isSessionPersistenceError(err) ? err.code : String(err)) })
    fs.inject({ op: 'close', path: /\.jsonl$/, times: 1, code: 'EIO' })
    expect(await codeOf(c.append(K, [{ type: 'x', uuid: 'c1' }]))).toBe('resolved')
    expect(errors).toEqual(['E_IO'])
    expect((await b.load(K))!.map((e) => e.uuid)).toEqual(['a1', 'b1', 'c1'])
    await Promise.all([a.close(), b.close(), c.close()])
  })
})
