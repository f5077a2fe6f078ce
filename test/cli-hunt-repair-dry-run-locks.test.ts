import { hostname } from 'node:os'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../src/torture/postgres-server.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { ev, meta, turn } from './helpers/events.js'
import { lockHolder as holder } from './helpers/lock-holder.js'
import { dropSchemas, freshSchema } from './helpers/pg-env.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// SPEC §11: `repair --dry-run` prints what `repair` would do without writing. `repair` is a load,
// refused E_LOCKED while another process writes the session, so the dry run says E_LOCKED there
// too (as the other dry runs do), not a plan the real run will never carry out.

describe.skipIf(process.platform === 'win32')('repair --dry-run and locks', () => {
  test('regression: a session a live writer holds is E_LOCKED in the dry run as in the real run; a free one still gets its plan; nothing is written', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    for (const id of ['free', 'held']) {
      await p.create(meta(id))
      await p.append(id, [...turn(0, 1), ev(4, 'turn/start', { turn: 2 })]) // an open turn: something to repair
    }
    await p.closeAll()
    const child = await holder(root, 'held')
    try {
      const before = await rootFiles(root)
      const real = await cli(['--root', root, 'repair', 'held'])
      expect(real.result).toBe('E_LOCKED')
      for (const json of [[], ['--json']]) {
        const dry = await cli(['--root', root, 'repair', 'held', '--dry-run', ...json])
        expect(dry).toEqual({ result: 'E_LOCKED', out: '', err: expect.stringContaining(`session 'held' is being written by pid ${child.pid} on host ${hostname()} since `) })
      }
      const free = await cli(['--root', root, 'repair', 'free', '--dry-run'])
      expect(free.result).toBe(0)
      expect(free.out).toMatch(/^no torn tail\nwould write 1 closing event\(s\):\n  seq 5 turn\/end /)
      expect(await rootFiles(root)).toEqual(before)
    } finally {
      child.kill('SIGKILL')
    }
  })
})

// On a PostgreSQL root the locks are the server's: the dry run reads them from pg_locks (through
// the store's heldSessions, as prune --dry-run does). This file is in the unit project (no
// shared server): it uses SPJ_PG_URL, or a throwaway server of its own where one can be started.
const unavailable = process.env.SPJ_PG_URL ? undefined : throwawayPostgresUnavailable()
describe.skipIf(unavailable !== undefined)('repair --dry-run and locks on a PostgreSQL root', () => {
  let server: ThrowawayPostgres | undefined
  let url = process.env.SPJ_PG_URL ?? ''
  const schema = freshSchema('clirep')
  beforeAll(async () => {
    if (!url) {
      server = await startThrowawayPostgres()
      url = server.url
    }
  }, 120_000)
  afterAll(async () => {
    if (server) await server.stop()
    else if (url) await dropSchemas(url, [schema])
  }, 120_000)

  test('regression: a session another connection holds is E_LOCKED in the dry run as in the real run; a free one gets its plan', async () => {
    const writer = createPostgresPersistence({ connectionString: url, schema })
    try {
      for (const id of ['free', 'held']) {
        await writer.create(meta(id))
        await writer.append(id, [...turn(0, 1), ev(4, 'turn/start', { turn: 2 })])
      }
      await writer.close('free') // 'held' stays open: this connection holds its lock
      const root = `${url}?schema=${schema}`
      expect((await cli(['--root', root, 'repair', 'held'])).result).toBe('E_LOCKED')
      expect((await cli(['--root', root, 'repair', 'held', '--dry-run'])).result).toBe('E_LOCKED')
      const free = await cli(['--root', root, 'repair', 'free', '--dry-run', '--json'])
      expect(free.result).toBe(0)
      expect(JSON.parse(free.out)).toMatchObject({ id: 'free', dryRun: true, events: 6, repair: { persisted: false } })
    } finally {
      await writer.closeAll()
      await writer.end()
    }
  }, 120_000)
})
