import { expect, test } from 'vitest'
import { createMemoryPersistence, MemoryStore } from '../src/testing/index.js'

// A long-lived in-memory store kept, per id it ever wrote, when its lock was taken (a hunt's
// find): close, delete and the refusals release the lock and that entry with it.

test('a store that wrote, closed and deleted 100 sessions holds no lock entry for any of them', async () => {
  const store = new MemoryStore()
  const p = createMemoryPersistence({ store })
  for (let i = 0; i < 100; i++) {
    const id = `s${i}`
    await p.create({ id, createdAt: 1, delegationDepth: 0 })
    await p.append(id, [{ seq: 0, type: 'note', time: 1 }])
    expect(store.lockedSince.has(id)).toBe(true) // held while open: E_LOCKED names since when
    await p.close(id)
    if (i % 2 === 0) await p.delete(id)
  }
  expect(store.locks.size).toBe(0)
  expect(store.lockedSince.size).toBe(0)
  expect(store.sessions.size).toBe(50)
})
