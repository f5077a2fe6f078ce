import { EventEmitter } from 'node:events'
import type pg from 'pg'
import { describe, expect, test } from 'vitest'
import { isConnectionError } from '../src/postgres/db.js'
import { LockConnection, type OpenedLockClient } from '../src/postgres/lock-connection.js'

// A hunt's find: a store that was the only writer of its sessions got E_LOCKED ("held by another
// instance, which has let go of it since") for ~1 in 60 first appends while its lock connection
// was being terminated: a lock query answered `locked` on a connection that died while answering
// was taken for a lock another connection holds. The lock went with the dead connection, which
// says nothing of anyone else: it is a connection failure, which the append path retries on a
// new connection until retryTimeoutMs.

/** A lock connection's server side whose connection can die while it answers a lock query. */
function fakeServer(dieOnFirstLock: boolean) {
  const clients: EventEmitter[] = []
  let died = !dieOnFirstLock
  const open = async (): Promise<OpenedLockClient> => {
    const client = new EventEmitter() as EventEmitter & { query: unknown }
    client.query = async (sql: string) => {
      if (sql.includes('pg_try_advisory_lock')) {
        if (!died) {
          died = true
          client.emit('end') // terminated while answering: the answer arrives, the connection is gone
        }
        return { rows: [{ locked: true }] }
      }
      return { rows: [{ unlocked: true }] }
    }
    clients.push(client)
    return { client: client as unknown as pg.ClientBase, close: async () => {} }
  }
  return { clients, open }
}

describe('a lock taken on a connection that died while answering', () => {
  test('is a connection failure (retried by the append path), never "held by another"', async () => {
    const server = fakeServer(true)
    const locks = new LockConnection(server.open)
    const first = await locks.tryLock('s/a').then(
      (v) => ({ resolved: v }),
      (e: unknown) => ({ rejected: e }),
    )
    expect(first).not.toEqual({ resolved: false })
    expect('rejected' in first && isConnectionError(first.rejected)).toBe(true)
    expect(locks.holds('s/a')).toBe(false)
    // Tried again, on a new connection: taken.
    expect(await locks.tryLock('s/a')).toBe(true)
    expect(server.clients).toHaveLength(2)
    expect(locks.holds('s/a')).toBe(true)
    await locks.unlock('s/a')
  })

  test('a lock another connection holds is still refused as such (false), the connection alive', async () => {
    const clients: EventEmitter[] = []
    const open = async (): Promise<OpenedLockClient> => {
      const client = new EventEmitter() as EventEmitter & { query: unknown }
      client.query = async () => ({ rows: [{ locked: false }] })
      clients.push(client)
      return { client: client as unknown as pg.ClientBase, close: async () => {} }
    }
    const locks = new LockConnection(open)
    expect(await locks.tryLock('s/b')).toBe(false)
  })
})
