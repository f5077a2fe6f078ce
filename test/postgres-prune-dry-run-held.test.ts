// `prune --dry-run` on a PostgreSQL root reports a session a live writer holds as the real run
// skips it (E_LOCKED, the same words), not as one it would remove, and takes no lock to find out:
// the writer lock there is a session-level advisory lock (lock-connection.ts), read from pg_locks.
import { afterAll, describe, expect, test } from 'vitest'
import { cliInProcess } from './helpers/cli-in-process.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('prunedry')
const stores: PostgresSessionPersistence[] = []
afterAll(async () => {
  for (const s of stores) await s.end()
  if (url) await dropSchemas(url, [schema])
})

/** The CLI from the sources, in this process: its exit code and output. */
const cli = async (args: string[]) => {
  const { result, out, err } = await cliInProcess(args)
  return { code: result, out, err }
}
/** The ids of this schema whose advisory writer lock is granted to some connection now. */
const lockedIds = async (ids: string[]) =>
  (
    await sql<{ id: string }>(
      url!,
      `SELECT id FROM unnest($1::text[]) AS id WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
         AND (l.classid::bigint << 32) | l.objid::bigint = hashtextextended($2 || '/' || id, 0))`,
      [ids, schema],
    )
  ).map((r) => r.id)

describe.skipIf(!url)('prune --dry-run on a PostgreSQL root', () => {
  test('a session a live writer holds is skipped as the real run skips it; one whose writer ended is removed by both', async () => {
    const root = `${url}?schema=${schema}`
    const writer = createPostgresPersistence({ connectionString: url!, schema, host: 'holder-host' })
    stores.push(writer)
    for (const id of ['old', 'oldheld', 'oldended', 'fresh']) {
      await writer.create(meta(id))
      await writer.append(id, turn(0, 1))
    }
    await writer.closeAll()
    const holder = createPostgresPersistence({ connectionString: url!, schema, host: 'holder-host' })
    const ended = createPostgresPersistence({ connectionString: url!, schema, host: 'ended-host' })
    stores.push(holder, ended)
    await holder.load('oldheld')
    await ended.load('oldended')
    await ended.end() // its connections, and with them its lock, are gone
    await sql(url!, `UPDATE "${schema}".sessions SET updated_at = now() - interval '40 days' WHERE session_id <> 'fresh'`)
    const ids = ['old', 'oldheld', 'oldended', 'fresh']
    expect(await lockedIds(ids)).toEqual(['oldheld'])

    const dry = await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run', '--json'])
    expect(dry.code).toBe(0)
    const dryJson = JSON.parse(dry.out)
    expect(dryJson.wouldRemove.map((s: { id: string }) => s.id).sort()).toEqual(['old', 'oldended'])
    expect(dryJson.skipped).toEqual([{ id: 'oldheld', code: 'E_LOCKED', message: expect.stringMatching(/^session 'oldheld' is held by host holder-host, pid \d+, since /) }])
    const text = await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run'])
    expect(text.err).toMatch(/^skipped oldheld: E_LOCKED: session 'oldheld' is held by host holder-host/)
    expect(text.out).toMatch(/would remove 2 session\(s\), .*; 1 skipped\n$/)
    // Nothing was taken or removed: the same locks are held, every session is still there.
    expect(await lockedIds(ids)).toEqual(['oldheld'])
    expect((await sql(url!, `SELECT count(*)::int AS n FROM "${schema}".sessions`))[0]!.n).toBe(4)

    // The real run does what the dry run said, in the same words.
    const realJson = JSON.parse((await cli(['--root', root, 'prune', '--older-than', '30d', '--json'])).out)
    expect(realJson.removed.map((s: { id: string }) => s.id).sort()).toEqual(['old', 'oldended'])
    expect(realJson.skipped).toEqual(dryJson.skipped)
    // The holder still holds and writes.
    await holder.append('oldheld', turn(4, 2))
    await holder.close('oldheld')
    const left = await sql<{ id: string }>(url!, `SELECT session_id AS id FROM "${schema}".sessions ORDER BY 1`)
    expect(left.map((r) => r.id)).toEqual(['fresh', 'oldheld'])
  })
})
