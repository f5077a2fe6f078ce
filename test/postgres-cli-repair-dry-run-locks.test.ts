import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { ev, meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

// SPEC §11: `repair --dry-run` prints what `repair` would do without writing. On a PostgreSQL
// root the locks are the server's: the dry run reads them from pg_locks (through the store's
// heldSessions, as prune --dry-run does) and says E_LOCKED where the real run's load is refused.
// The directory root's case: test/cli-hunt-repair-dry-run-locks.test.ts.

const url = pgUrl()

describe.skipIf(!url)('repair --dry-run and locks on a PostgreSQL root', () => {
  const schema = freshSchema('clirep')
  afterAll(async () => {
    if (url) await dropSchemas(url, [schema])
  })

  test('regression: a session another connection holds is E_LOCKED in the dry run as in the real run; a free one gets its plan', async () => {
    const writer = createPostgresPersistence({ connectionString: url!, schema })
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
