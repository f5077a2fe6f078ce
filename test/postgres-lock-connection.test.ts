import { EventEmitter } from 'node:events'
import type pg from 'pg'
import { describe, expect, test } from 'vitest'
import { LockConnection, type OpenedLockClient } from '../src/postgres/lock-connection.js'

/**
 * A stand-in for the lock connection's server side: session-level advisory locks are
 * re-entrant, so the server counts how many times each key is held on the connection.
 */
function fakeServer() {
  const counts = new Map<string, number>()
  const clients: EventEmitter[] = []
  const open = async (): Promise<OpenedLockClient> => {
    const client = new EventEmitter() as EventEmitter & { query: unknown }
    client.query = async (sql: string, [key]: [string]) => {
      const n = counts.get(key) ?? 0
      if (sql.includes('pg_try_advisory_lock')) {
        counts.set(key, n + 1)
        return { rows: [{ locked: true }] }
      }
      if (n > 0) counts.set(key, n - 1)
      return { rows: [{ unlocked: n > 0 }] }
    }
    clients.push(client)
    return { client: client as unknown as pg.ClientBase, close: async () => {} }
  }
  return { counts, clients, open }
}

describe('the lock connection never holds a key twice (one unlock must release it)', () => {
  test('a second tryLock of a key already held is refused and does not take it again', async () => {
    const server = fakeServer()
    const locks = new LockConnection(server.open)
    expect(await locks.tryLock('s/a')).toBe(true)
    expect(await locks.tryLock('s/a')).toBe(false)
    await locks.unlock('s/a')
    expect(server.counts.get('s/a') ?? 0).toBe(0)
  })

  test('a re-take pass skips a key that was taken again by a new holder meanwhile', async () => {
    const server = fakeServer()
    const locks = new LockConnection(server.open)
    expect(await locks.tryLock('s/a')).toBe(true)
    expect(await locks.tryLock('s/b')).toBe(true)
    // The connection dies: both keys are orphans, the server released them.
    server.counts.clear()
    server.clients[0]!.emit('end')
    expect(locks.healthy).toBe(false)
    // The pass takes 's/a' first; while it waits, 's/b' is taken again by a new load.
    let takeB: Promise<boolean> | undefined
    const pass = locks.reacquire()
    takeB = locks.tryLock('s/b')
    await pass
    expect(await takeB).toBe(true)
    expect(server.counts.get('s/b')).toBe(1)
    await locks.unlock('s/b')
    expect(server.counts.get('s/b') ?? 0).toBe(0)
    await locks.unlock('s/a')
    expect(server.counts.get('s/a') ?? 0).toBe(0)
  })
})
