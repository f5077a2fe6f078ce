// E_LOCKED names the lock's holder from the application_name of the connection holding it
// (pg_stat_activity) checked against the session's row. That name must be the store's own and
// readable back: a connection string's `application_name` overrode it (so the lock's holder looked
// like no store's and went unnamed), and the server keeps an application_name in ASCII, replacing
// other bytes (so a non-ASCII host never matched its row, and was named mangled, pid unknown).
// Where the name does not clearly say another host holds the lock, the row is named, as before.
// And "does a store of this process hold it" must be asked of the server the lock is on: the
// count was by schema and session id only, so a store of this process holding the same session
// of another server made a row naming this process look right.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import pg from 'pg'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../src/torture/postgres-server.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'
import { pgRequired } from './helpers/pg-required.js'

const url = pgUrl()
const schema = freshSchema('lockname')
const stores: PostgresSessionPersistence[] = []
const clients: pg.Client[] = []
const open = (host: string, connectionString = url!) => {
  const store = createPostgresPersistence({ connectionString, schema, host })
  stores.push(store)
  return store
}
/** A connection named `name` holding the lock of session `id`, as another process's lock connection would. */
const holdAs = async (name: string, id: string, connectionString = url!) => {
  const c = new pg.Client({ connectionString, application_name: name })
  clients.push(c)
  await c.connect()
  await c.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`${schema}/${id}`])
  return c
}
/** Makes the session's row record another process of its host as its holder. */
const recordOtherPid = (id: string) => sql(url!, `UPDATE "${schema}".sessions SET holder_pid = $2 WHERE session_id = $1`, [id, process.pid + 1])
/** The application_name of the connection holding the lock of session `id`. */
const lockHoldersName = async (id: string) =>
  (
    await sql<{ name: string }>(
      url!,
      `SELECT a.application_name AS name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.classid = ((hashtextextended($1, 0) >> 32) & 4294967295)::oid AND l.objid = (hashtextextended($1, 0) & 4294967295)::oid`,
      [`${schema}/${id}`],
    )
  ).map((r) => r.name)

afterAll(async () => {
  for (const c of clients) await c.end().catch(() => {})
  for (const s of stores) await s.end()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('E_LOCKED reads the holder from its lock connection\'s name', () => {
  test('a connection string setting application_name: the lock connection keeps the store\'s name, and its holder is named', async () => {
    const withName = new URL(url!)
    withName.searchParams.set('application_name', 'myapp')
    const a = open('host-url', withName.toString())
    const b = open('host-url-b')
    await a.create(meta('u'))
    await a.append('u', turn(0, 1))
    expect(await lockHoldersName('u')).toEqual(['session-persistence-jsonl host-url'])
    const locked = await rejection(b.load('u'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-url', pid: process.pid, since: expect.any(Number) } })
    expect(locked.message).toMatch(new RegExp(`^session 'u' is held by host host-url, pid ${process.pid}, since \\d{4}-`))
    await a.close('u')
  })

  test('a non-ASCII host: its lock connection is named with the host percent-encoded, and it is named as its row records', async () => {
    const a = open('hôte-a')
    const b = open('host-n')
    await a.create(meta('n'))
    await a.append('n', turn(0, 1))
    expect(await lockHoldersName('n')).toEqual(['session-persistence-jsonl h%C3%B4te-a'])
    const locked = await rejection(b.load('n'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'hôte-a', pid: process.pid, since: expect.any(Number) } })
    expect(locked.message).toMatch(new RegExp(`^session 'n' is held by host hôte-a, pid ${process.pid}, since \\d{4}-`))
    await a.close('n')
  })

  test('a non-ASCII host (and one with a %) holding the lock without a claim: its host read back as it is', async () => {
    for (const [id, host, name] of [['m', 'hôte-b', 'h%C3%B4te-b'], ['p', 'a%41b', 'a%41b']] as const) {
      const a = open(`row-${id}`)
      await a.create(meta(id))
      await a.append(id, turn(0, 1)) // the row records row-<id>
      await a.close(id)
      // A store of `host` holding the lock without a claim (as a delete does), through a
      // connection named as its lock connection is (the test above reads that name).
      const b = await holdAs(`session-persistence-jsonl ${name}`, id)
      const locked = await rejection(a.load(id))
      expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host, pid: 0, since: 0 } })
      expect(locked.message).toBe(
        `session '${id}' is held by an instance on host ${host} (its pid and since when are not recorded: it holds the lock without having claimed the session)`,
      )
      await b.end()
    }
  })

  test('a lock connection named as the server keeps a non-ASCII name (an older store\'s): the row\'s holder of that host is named', async () => {
    const a = open('hôte-g')
    await a.create(meta('g'))
    await a.append('g', turn(0, 1))
    await a.close('g')
    await recordOtherPid('g') // the row records another process of hôte-g, as it would have claimed it
    const other = await holdAs('session-persistence-jsonl hôte-g', 'g') // the server keeps it as 'h??te-g'
    const locked = await rejection(a.load('g'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'hôte-g', pid: process.pid + 1, since: expect.any(Number) } })
    expect(locked.message).toMatch(new RegExp(`^session 'g' is held by host hôte-g, pid ${process.pid + 1}, since \\d{4}-`))
    await other.end()
  })

  test('a lock connection whose name is no store\'s, the row recording another process: the row\'s holder is named, and the name said', async () => {
    const a = open('host-o')
    await a.create(meta('o'))
    await a.append('o', turn(0, 1))
    await a.close('o')
    await recordOtherPid('o') // an older store of host-o, its lock connection named by its connection string
    const other = await holdAs('myapp', 'o')
    const locked = await rejection(a.load('o'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-o', pid: process.pid + 1, since: expect.any(Number) } })
    expect(locked.message).toMatch(
      new RegExp(
        `^session 'o' is held by host host-o, pid ${process.pid + 1}, since \\S+, as its row records \\(the connection holding the lock is named 'myapp', not as a session store's\\)$`,
      ),
    )
    await other.end()
  })

  test('a row recording this pid with a host none of this process\'s stores has (another machine\'s process of the same pid): named as it records', async () => {
    const a = open('host-q')
    await a.create(meta('q'))
    await a.append('q', turn(0, 1))
    await a.close('q')
    // Another machine's process, pid as this one's (pid 1 in two containers, say), claimed it.
    await sql(url!, `UPDATE "${schema}".sessions SET holder_host = 'far-away', holder_pid = $2 WHERE session_id = $1`, ['q', process.pid])
    const other = await holdAs('session-persistence-jsonl far-away', 'q')
    const locked = await rejection(a.load('q'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'far-away', pid: process.pid, since: expect.any(Number) } })
    expect(locked.message).toMatch(new RegExp(`^session 'q' is held by host far-away, pid ${process.pid}, since \\d{4}-`))
    await other.end()
  })
})

// A second server, private to this file, for a store of this process on another server.
const noServer = throwawayPostgresUnavailable()
if (noServer && url && pgRequired()) throw new Error(`PostgreSQL tests cannot run here and must (CI): ${noServer}`)

describe.skipIf(!url || noServer !== undefined)('"a store of this process holds it" is asked of the lock\'s server', () => {
  let second: ThrowawayPostgres
  beforeAll(async () => {
    second = await startThrowawayPostgres()
  })
  afterAll(async () => {
    await second?.stop()
  })

  test('this process holds the same session of another server: a row naming this process is still known stale here', async () => {
    const elsewhere = open('host-k', second.url)
    await elsewhere.create(meta('k'))
    await elsewhere.append('k', turn(0, 1)) // this process holds <schema>/k on the other server
    const a = open('host-k')
    await a.create(meta('k'))
    await a.append('k', turn(0, 1))
    await a.close('k') // the row here records host-k, this pid; no store of this process holds it here
    const other = await holdAs('session-persistence-jsonl host-k', 'k') // another process of host-k does
    const locked = await rejection(a.load('k'))
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { host: 'host-k', pid: 0, since: 0 } })
    expect(locked.message).not.toMatch(String(process.pid))
    await other.end()
    await elsewhere.close('k')
  })
})
