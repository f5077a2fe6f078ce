import { existsSync } from 'node:fs'
import { afterAll, describe, test } from 'vitest'
import { runPersistenceContract } from '../src/contract/index.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schemas = new Map<string, string>()
const opened = new Map<string, { end(): Promise<void> }[]>()
let ending: Promise<unknown> = Promise.resolve()

if (url) {
  // The contract hands each test fresh directories: each directory gets its own schema. Once
  // the contract has removed a directory (after its test), that directory's stores are ended,
  // so the shared server never holds every test's connections at once.
  runPersistenceContract({
    name: 'PostgreSQL',
    factory: async (dir) => {
      for (const [d, stores] of opened) {
        if (existsSync(d)) continue
        opened.delete(d)
        ending = Promise.all([ending, ...stores.map((st) => st.end())])
      }
      await ending
      let schema = schemas.get(dir)
      if (!schema) schemas.set(dir, (schema = freshSchema('contract')))
      const store = createPostgresPersistence({ connectionString: url, schema, poolSize: 4 })
      opened.set(dir, [...(opened.get(dir) ?? []), store])
      return store
    },
  })
  afterAll(async () => {
    await Promise.all([ending, ...[...opened.values()].flat().map((st) => st.end())])
    await dropSchemas(url, schemas.values())
  })
} else {
  describe.skip('PostgreSQL contract (no server)', () => test('skipped', () => {}))
}
