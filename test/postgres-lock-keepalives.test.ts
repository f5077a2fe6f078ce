// The lock connection asks the server for short TCP keepalives: when a host loses power, the
// server drops its connection — and the advisory locks that say its sessions are taken — within
// about 30 s instead of Linux's default two hours.
import pg from 'pg'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('keepalive')
afterAll(async () => {
  vi.restoreAllMocks()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('the lock connection', () => {
  test('holds the session locks with server-side keepalives of 10 s idle, 5 s interval, 3 probes, 30 s user timeout', async () => {
    const clients: pg.Client[] = []
    const connect = pg.Client.prototype.connect
    vi.spyOn(pg.Client.prototype, 'connect').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      clients.push(this)
      return (connect as unknown as (...a: unknown[]) => Promise<void>).apply(this, args)
    } as unknown as typeof connect)
    const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
    try {
      await store.create({ id: 'k', createdAt: 1, delegationDepth: 0 })
      await store.append('k', [{ seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } }])
      const settings: string[] = []
      for (const c of clients) {
        const held = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`)
        if (held.rows[0]!.n === 0) continue
        for (const name of ['tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout']) {
          settings.push(`${name}=${(await c.query(`SHOW ${name}`)).rows[0][name]}`)
        }
      }
      expect(settings).toEqual(['tcp_keepalives_idle=10', 'tcp_keepalives_interval=5', 'tcp_keepalives_count=3', 'tcp_user_timeout=30000'])
    } finally {
      await store.end()
    }
  })
})
