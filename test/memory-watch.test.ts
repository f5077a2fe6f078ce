import { describe, expect, test } from 'vitest'
import { createMemoryPersistence, MemoryStore } from '../src/memory/memory-persistence.js'

const meta = { id: 's', createdAt: 1_700_000_000_000, delegationDepth: 0 }

describe('in-memory watch', () => {
  test('a watch() never iterated holds no change listener; one iterated holds one until it ends', async () => {
    const store = new MemoryStore()
    const p = createMemoryPersistence({ store })
    await p.create(meta)
    await p.append('s', [{ seq: 0, type: 'x', time: 1 }])
    for (let i = 0; i < 100; i++) p.watch('s', { fromSeq: 0 })
    expect(store.changes.listenerCount('change')).toBe(0)

    const stop = new AbortController()
    const iterator = p.watch('s', { signal: stop.signal })[Symbol.asyncIterator]()
    expect((await iterator.next()).value).toMatchObject({ seq: 0 })
    expect(store.changes.listenerCount('change')).toBe(1)
    const waiting = iterator.next()
    stop.abort()
    expect((await waiting).done).toBe(true)
    expect(store.changes.listenerCount('change')).toBe(0)
  })
})
