// A hunt's find: the SessionCheckpointSaver took option keys it does not know without a word (a
// misspelt `idleMs` silently kept each thread's lock for the default 30 s). The core, plugin and
// PostgreSQL configs refuse an unknown key with E_CONFIG naming it; now the saver does.
// The per-call arguments (a RunnableConfig, list's CheckpointListOptions) are LangGraph's own
// types, which it passes with fields of its own: they stay open.
import { readdir } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { thrown } from './helpers/codes.js'
import { checkpoint, freshRoots, meta, thread } from './helpers/langgraph-checkpoints.js'

const root = freshRoots()

describe('SessionCheckpointSaver options', () => {
  it('a misspelt idleMs (idleMS) is E_CONFIG naming it; nothing is opened or written', async () => {
    const r = await root()
    const err = thrown(() => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMS: 0 } as never))
    expect(err.code).toBe('E_CONFIG')
    expect(err.message).toContain('"idleMS"')
    expect(await readdir(r)).toEqual([])
  })

  it('a bad known field is still named', () => {
    const err = thrown(() => new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: '/nonexistent-never-written' }), idleMs: -1 }))
    expect(err.code).toBe('E_CONFIG')
    expect(err.message).toContain('idleMs')
  })

  it("list's options with a key LangGraph may add are not refused (the framework's type)", async () => {
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: await root() }), idleMs: 0 })
    await saver.put(thread('L'), checkpoint({ a: 1 }, { a: 1 }), meta(0), { a: 1 })
    const listed = []
    for await (const t of saver.list(thread('L'), { limit: 5, someFutureOption: true } as never)) listed.push(t.checkpoint.channel_values)
    expect(listed).toEqual([{ a: 1 }])
    await saver.close()
  })
})
