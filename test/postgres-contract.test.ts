import { afterAll, describe, test } from 'vitest'
import { runPersistenceContract } from '../src/contract/index.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schemas = new Map<string, string>()
const opened: { end(): Promise<void> }[] = []

if (url) {
  // The contract hands each test a fresh directory: each directory gets its own schema.
  runPersistenceContract({
    name: 'PostgreSQL',
    factory: (dir) => {
      let schema = schemas.get(dir)
      if (!schema) schemas.set(dir, (schema = freshSchema('contract')))
      const store = createPostgresPersistence({ connectionString: url, schema, poolSize: 4 })
      opened.push(store)
      return store
    },
  })
  afterAll(async () => {
    await Promise.all(opened.map((s) => s.end()))
    await dropSchemas(url, schemas.values())
  })
} else {
  describe.skip('PostgreSQL contract (no server)', () => test('skipped', () => {}))
}
