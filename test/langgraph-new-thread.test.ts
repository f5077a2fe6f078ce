// A thread's first write after a read that found no log (LangGraph's `invoke` reads a thread,
// then writes it) creates the session without looking it up again; when another instance has
// written the thread meanwhile, the create is refused and the log is loaded instead.
import { rm } from 'node:fs/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { checkpoint, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

/** The backend's calls, by method name and outcome. */
function counted(inner: SessionPersistence) {
  const calls: string[] = []
  const persistence = new Proxy(inner, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver)
      if (typeof v !== 'function') return v
      if (key !== 'load' && key !== 'create') return v.bind(target)
      return async (...args: unknown[]) => {
        try {
          const r = await (v as (...a: unknown[]) => Promise<unknown>).apply(target, args)
          calls.push(`${String(key)} ok`)
          return r
        } catch (err) {
          calls.push(`${String(key)} ${(err as { code?: string }).code}`)
          throw err
        }
      }
    },
  })
  return { persistence, calls }
}

describe('a new thread', () => {
  it('read, then written: one lookup (the read), then create', async () => {
    const c = counted(createMemoryPersistence())
    const saver = new SessionCheckpointSaver({ persistence: c.persistence, idleMs: Infinity })
    expect(await saver.getTuple(thread('t'))).toBeUndefined()
    const cp = checkpoint({ a: 1 })
    await saver.put(thread('t'), cp, meta(-1, 'input'), { a: 1 })
    expect(c.calls).toEqual(['load E_NOT_FOUND', 'create ok'])
    expect((await saver.getTuple(thread('t')))?.checkpoint.id).toBe(cp.id)
    await saver.close()
  })

  it('written without a read first: looked up, then created', async () => {
    const c = counted(createMemoryPersistence())
    const saver = new SessionCheckpointSaver({ persistence: c.persistence, idleMs: Infinity })
    await saver.put(thread('t'), checkpoint({ a: 1 }), meta(-1, 'input'), { a: 1 })
    expect(c.calls).toEqual(['load E_NOT_FOUND', 'create ok'])
    await saver.close()
  })

  it('read as absent, then written by another process first: the create is refused, the log loaded and appended to', async () => {
    const root = await freshRoot()
    roots.push(root)
    const c = counted(createJsonlPersistence({ root }))
    const mine = new SessionCheckpointSaver({ persistence: c.persistence, idleMs: Infinity })
    const other = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: Infinity })
    expect(await mine.getTuple(thread('t'))).toBeUndefined()

    const theirs = checkpoint({ a: 1 })
    const theirConfig = await other.put(thread('t'), theirs, meta(-1, 'input'), { a: 1 })
    await other.release('t')

    const ours = checkpoint({ a: 2 }, { a: 2 })
    await mine.put(theirConfig, ours, meta(0), { a: 2 })
    expect(c.calls).toEqual(['load E_NOT_FOUND', 'create E_EXISTS', 'load ok'])
    const ids: string[] = []
    for await (const t of mine.list(thread('t'))) ids.push(t.checkpoint.id)
    expect(ids).toEqual([ours.id, theirs.id])
    await mine.close()

    // What a fresh reader finds: both checkpoints, ours the child of theirs.
    const reader = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    const latest = await reader.getTuple(thread('t'))
    expect(latest?.checkpoint.id).toBe(ours.id)
    expect(latest?.parentConfig?.configurable?.checkpoint_id).toBe(theirs.id)
    await reader.close()
  })
})
