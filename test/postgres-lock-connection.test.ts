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

/** One-shot gates by name: `wait(name)` resolves once `release(name)` is called (in either order). */
function gates() {
  const opened = new Map<string, { promise: Promise<void>; release: () => void; waiting: boolean }>()
  const get = (name: string) => {
    let g = opened.get(name)
    if (!g) {
      let release!: () => void
      const promise = new Promise<void>((r) => (release = r))
      g = { promise, release, waiting: false }
      opened.set(name, g)
    }
    return g
  }
  return {
    wait(name: string) {
      const g = get(name)
      g.waiting = true
      return g.promise
    },
    async reached(name: string) {
      while (!get(name).waiting) await new Promise((r) => setImmediate(r))
    },
    release: (name: string) => get(name).release(),
  }
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
  test('a key released while the re-take pass takes it again is never refused to this instance: its next take waits for the pass, then takes it once', async () => {
    const server = fakeServer()
    const g = gates()
    const open = async () => {
      const opened = await server.open()
      const client = opened.client as unknown as { query: (sql: string, values: [string]) => Promise<unknown> }
      const query = client.query
      const again = server.clients.length > 1
      const answered = new Set<string>()
      client.query = async (sql, values) => {
        // On the new connection, the pass's lock query of each key answers late (the first one only).
        if (again && sql.includes('pg_try_advisory_lock') && !answered.has(values[0])) {
          answered.add(values[0])
          await g.wait(`lock ${values[0]}`)
        }
        return query(sql, values)
      }
      return opened
    }
    // After a re-take, the pass asks whether the session is still ours; that answer is held too.
    const locks = new LockConnection(open, async (key) => (await g.wait(`ours ${key}`), true))
    expect(await locks.tryLock('s/a')).toBe(true)
    expect(await locks.tryLock('s/b')).toBe(true)
    server.counts.clear()
    server.clients[0]!.emit('end')
    const pass = locks.reacquire()
    // 's/a': its session is closed while the pass's lock query is in flight, then loaded again.
    await g.reached('lock s/a')
    await locks.unlock('s/a')
    const a = locks.tryLock('s/a')
    g.release('lock s/a')
    g.release('lock s/b') // the pass goes on to 's/b' (one query at a time on the connection)
    expect(await a).toBe(true)
    expect(server.counts.get('s/a')).toBe(1)
    // 's/b': its lock landed, and the pass is asking whether the session is still ours when the
    // session is closed and loaded again.
    await g.reached('ours s/b')
    await locks.unlock('s/b')
    const b = locks.tryLock('s/b')
    g.release('ours s/b')
    await pass
    expect(await b).toBe(true)
    expect(server.counts.get('s/b')).toBe(1)
    await locks.unlock('s/a')
    await locks.unlock('s/b')
    expect(server.counts.get('s/a') ?? 0).toBe(0)
    expect(server.counts.get('s/b') ?? 0).toBe(0)
  })
})
