// The 13 behavioural contracts the Claude Agent SDK asks of a `SessionStore` (its repository's
// examples/session-stores/shared/conformance.ts lists them), written for this project in vitest.
import { afterEach, describe, expect, it } from 'vitest'
import { createSessionStore, type ClaudeSessionStore, type SessionStoreEntry } from '../../src/adapters/claude-agent-sdk/index.js'
import type { BackendFactory } from './claude-agent-sdk-backends.js'

const entry = (n: number, extra: Record<string, unknown> = {}): SessionStoreEntry => ({
  type: n % 2 ? 'user' : 'assistant',
  uuid: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  timestamp: new Date(1_700_000_000_000 + n).toISOString(),
  message: n % 2 ? { role: 'user', content: `prompt ${n}` } : { role: 'assistant', content: [{ type: 'text', text: `answer ${n}` }] },
  ...extra,
})

export function runStoreContracts(name: string, factory: BackendFactory): void {
  describe(`SessionStore contracts over ${name}`, () => {
    let cleanups: (() => Promise<void>)[] = []
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c()
    })
    const fresh = async (): Promise<ClaudeSessionStore> => {
      const backend = await factory()
      const store = createSessionStore({ persistence: backend.persistence })
      cleanups.push(backend.cleanup, () => store.close())
      return store
    }
    const key = { projectKey: 'proj', sessionId: 'sess-1' }

    it('1. load returns what append stored, deep-equal and in order', async () => {
      const store = await fresh()
      const entries = [entry(1), entry(2, { nested: { a: [1, 'x', null, { b: true }] } }), { type: 'mode', mode: 'plan' }]
      await store.append(key, entries)
      expect(await store.load(key)).toEqual(entries)
    })

    it('2. a key never written loads null', async () => {
      const store = await fresh()
      expect(await store.load({ projectKey: 'proj', sessionId: 'never' })).toBeNull()
    })

    it('3. several appends load in call order', async () => {
      const store = await fresh()
      await store.append(key, [entry(1)])
      await store.append(key, [entry(2), entry(3)])
      await store.append(key, [entry(4)])
      expect((await store.load(key))?.map((e) => e.uuid)).toEqual([1, 2, 3, 4].map((n) => entry(n).uuid))
    })

    it('4. append([]) is a no-op: a never-written key still loads null', async () => {
      const store = await fresh()
      await store.append(key, [])
      expect(await store.load(key)).toBeNull()
      expect(await store.listSessions('proj')).toEqual([])
    })

    it('5. a subpath is independent of its main transcript', async () => {
      const store = await fresh()
      const sub = { ...key, subpath: 'subagents/agent-1' }
      await store.append(key, [entry(1)])
      await store.append(sub, [entry(2)])
      expect(await store.load(key)).toEqual([entry(1)])
      expect(await store.load(sub)).toEqual([entry(2)])
    })

    it('6. projectKeys are isolated: one sessionId in two projects is two sessions', async () => {
      const store = await fresh()
      await store.append({ projectKey: 'a', sessionId: 's' }, [entry(1)])
      await store.append({ projectKey: 'b', sessionId: 's' }, [entry(2)])
      expect(await store.load({ projectKey: 'a', sessionId: 's' })).toEqual([entry(1)])
      expect(await store.load({ projectKey: 'b', sessionId: 's' })).toEqual([entry(2)])
      expect((await store.listSessions('a')).map((s) => s.sessionId)).toEqual(['s'])
    })

    it('7. listSessions gives the ids with their mtime in epoch ms; [] for an unknown project', async () => {
      const store = await fresh()
      const before = Date.now()
      await store.append({ projectKey: 'proj', sessionId: 's1' }, [entry(1)])
      await store.append({ projectKey: 'proj', sessionId: 's2' }, [entry(2)])
      await store.append({ projectKey: 'other', sessionId: 's3' }, [entry(3)])
      const after = Date.now()
      const listed = (await store.listSessions('proj')).sort((x, y) => x.sessionId.localeCompare(y.sessionId))
      expect(listed.map((s) => s.sessionId)).toEqual(['s1', 's2'])
      for (const s of listed) {
        expect(Number.isInteger(s.mtime)).toBe(true)
        // File mtimes can lag the clock by a tick of the file system's granularity.
        expect(s.mtime).toBeGreaterThanOrEqual(before - 1000)
        expect(s.mtime).toBeLessThanOrEqual(after + 1000)
      }
      expect(await store.listSessions('nobody')).toEqual([])
    })

    it('8. listSessions excludes subpaths', async () => {
      const store = await fresh()
      await store.append({ ...key, subpath: 'subagents/agent-1' }, [entry(1)])
      expect(await store.listSessions('proj')).toEqual([])
      await store.append(key, [entry(2)])
      expect((await store.listSessions('proj')).map((s) => s.sessionId)).toEqual(['sess-1'])
    })

    it('9. delete, then the key loads null; deleting an unknown key does not throw', async () => {
      const store = await fresh()
      await store.append(key, [entry(1)])
      await store.delete(key)
      expect(await store.load(key)).toBeNull()
      await expect(store.delete({ projectKey: 'proj', sessionId: 'never' })).resolves.toBeUndefined()
      expect(await store.listSessions('proj')).toEqual([])
    })

    it('10. deleting a main key deletes its subkeys, and no other session', async () => {
      const store = await fresh()
      const subs = ['subagents/agent-1', 'subagents/agent-2']
      await store.append(key, [entry(1)])
      for (const subpath of subs) await store.append({ ...key, subpath }, [entry(2)])
      const others = [
        { projectKey: 'proj', sessionId: 'sess-2' },
        { projectKey: 'proj', sessionId: 'sess-2', subpath: 'subagents/agent-1' },
        { projectKey: 'elsewhere', sessionId: 'sess-1' },
        { projectKey: 'elsewhere', sessionId: 'sess-1', subpath: 'subagents/agent-1' },
      ]
      for (const k of others) await store.append(k, [entry(3)])
      await store.delete(key)
      expect(await store.load(key)).toBeNull()
      for (const subpath of subs) expect(await store.load({ ...key, subpath })).toBeNull()
      expect(await store.listSubkeys(key)).toEqual([])
      for (const k of others) expect(await store.load(k)).toEqual([entry(3)])
    })

    it('11. deleting a subpath removes only that subpath', async () => {
      const store = await fresh()
      await store.append(key, [entry(1)])
      await store.append({ ...key, subpath: 'subagents/agent-1' }, [entry(2)])
      await store.append({ ...key, subpath: 'subagents/agent-2' }, [entry(3)])
      await store.delete({ ...key, subpath: 'subagents/agent-1' })
      expect(await store.load({ ...key, subpath: 'subagents/agent-1' })).toBeNull()
      expect(await store.load({ ...key, subpath: 'subagents/agent-2' })).toEqual([entry(3)])
      expect(await store.load(key)).toEqual([entry(1)])
    })

    it("12. listSubkeys lists that session's subpaths", async () => {
      const store = await fresh()
      await store.append({ ...key, subpath: 'subagents/agent-b' }, [entry(1)])
      await store.append({ ...key, subpath: 'subagents/agent-a' }, [entry(2)])
      await store.append({ projectKey: 'proj', sessionId: 'sess-2', subpath: 'subagents/agent-c' }, [entry(3)])
      await store.append({ projectKey: 'other', sessionId: 'sess-1', subpath: 'subagents/agent-d' }, [entry(4)])
      expect((await store.listSubkeys(key)).sort()).toEqual(['subagents/agent-a', 'subagents/agent-b'])
      expect(await store.listSubkeys({ projectKey: 'proj', sessionId: 'none' })).toEqual([])
    })

    it('13. listSubkeys excludes the main transcript', async () => {
      const store = await fresh()
      await store.append(key, [entry(1)])
      expect(await store.listSubkeys(key)).toEqual([])
      await store.append({ ...key, subpath: 'subagents/agent-1' }, [entry(2)])
      expect(await store.listSubkeys(key)).toEqual(['subagents/agent-1'])
    })
  })
}
