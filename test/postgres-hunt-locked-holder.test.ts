// E_LOCKED names the session's real holder (SPEC §13), or says honestly what is not known. The
// writer lock is the session's advisory lock; the row records the last instance that claimed the
// session. The two differ while an instance holds the lock without having claimed the row (a
// delete holds it without a claim; a first append refused E_EXISTS held it until close, and now
// lets go of it at once), and E_LOCKED named the row's holder then: here the caller itself.
import { afterAll, describe, expect, test } from 'vitest'
import pg from 'pg'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('lockedby')
const stores: PostgresSessionPersistence[] = []
const clients: pg.Client[] = []
const open = (host: string) => {
  const store = createPostgresPersistence({ connectionString: url!, schema, host })
  stores.push(store)
  return store
}
afterAll(async () => {
  for (const c of clients) await c.end().catch(() => {})
  for (const s of stores) await s.end()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('E_LOCKED names the holder of the lock', () => {
  test('an instance holding the lock without a claim of the row: named by its host, never the row\'s holder', async () => {
    const a = open('host-a')
    await a.create(meta('x'))
    await a.append('x', turn(0, 1)) // the row records host-a, this pid
    await a.close('x')
    // A store of host host-b holding the lock without having claimed the row (as a delete holds
    // it), through a connection named as its lock connection is.
    const b = new pg.Client({ connectionString: url!, application_name: 'session-persistence-jsonl host-b' })
    clients.push(b)
    await b.connect()
    await b.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`${schema}/x`])
    const locked = await rejection(a.load('x'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-b', pid: 0, since: 0 } })
    expect(locked.message).toMatch(/^session 'x' is held by an instance on host host-b \(/)
    expect(locked.message).not.toMatch(/host-a/)
    await b.end()
    expect((await a.load('x')).events).toHaveLength(4) // free again once b let go
    await a.close('x')
  })

  test('the instance that claimed the row and holds the lock is named as the row records it', async () => {
    const a = open('host-c')
    const b = open('host-d')
    await a.create(meta('y'))
    await a.append('y', turn(0, 1))
    const locked = await rejection(b.load('y'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-c', pid: process.pid, since: expect.any(Number) } })
    expect(locked.message).toMatch(new RegExp(`^session 'y' is held by host host-c, pid ${process.pid}, since \\d{4}-`))
    await a.close('y')
  })

  test('the row records this process, but another process of the same host holds the lock: named by the host, not by this pid', async () => {
    const a = open('host-g')
    await a.create(meta('w'))
    await a.append('w', turn(0, 1))
    await a.close('w') // the row records host-g, this pid; no store of this process holds it now
    // Another process of host host-g holding the lock, as its lock connection would.
    const other = new pg.Client({ connectionString: url!, application_name: 'session-persistence-jsonl host-g' })
    clients.push(other)
    await other.connect()
    await other.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`${schema}/w`])
    const locked = await rejection(a.load('w'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-g', pid: 0, since: 0 } })
    expect(locked.message).not.toMatch(String(process.pid))
    await other.end()
    expect((await a.load('w')).events).toHaveLength(4)
    await a.close('w')
  })

  test('a lock held by a connection that is no store\'s: said so, no holder named', async () => {
    const a = open('host-e')
    await a.create(meta('z'))
    await a.append('z', turn(0, 1))
    await a.close('z') // the row records host-e
    const foreign = new pg.Client({ connectionString: url!, application_name: 'some-tool' })
    clients.push(foreign)
    await foreign.connect()
    await foreign.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`${schema}/z`])
    const locked = await rejection(a.load('z'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: undefined })
    expect(locked.message).toBe(`session 'z' is held by a connection that is not a session store's (application_name 'some-tool')`)
    await foreign.end()
    expect((await a.load('z')).events).toHaveLength(4)
    await a.close('z')
  })
})
