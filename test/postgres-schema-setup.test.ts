// `schemaSetup: 'existing'`: a store that never creates or migrates its schema, and the CLI,
// which opens every root that way except the target of `copy`. A mistyped `?schema=` must not
// let `verify` or `prune` report success on an empty schema made on the spot, and a command that
// reads must not migrate (DDL, exclusive locks) a schema an older release left.
import { afterAll, describe, expect, test } from 'vitest'
import { main } from '../src/cli/main.js'
import type { Io } from '../src/cli/commands.js'
import { makeStyle } from '../src/cli/render.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createPostgresPersistence, type PostgresSessionPersistence, SCHEMA_VERSION } from '../src/postgres/index.js'
import { MIGRATIONS } from '../src/postgres/migrations.js'
import { ev, meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
const stores: PostgresSessionPersistence[] = []
const schema = (prefix: string) => {
  const s = freshSchema(prefix)
  schemas.push(s)
  return s
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

const errorOf = (p: Promise<unknown>) => p.then(() => ({ code: 'resolved', message: '' }), (e: { code?: string; message?: string }) => ({ code: e.code ?? String(e), message: String(e.message) }))
const schemaExists = async (s: string) => (await sql(url!, 'SELECT 1 FROM pg_namespace WHERE nspname = $1', [s])).length === 1
const versionOf = async (s: string) => (await sql<{ v: number }>(url!, `SELECT max(version) AS v FROM "${s}".schema_migrations`))[0]!.v

/** A schema as a release at `version` left it (its migrations applied by hand). */
async function schemaAt(s: string, version: number): Promise<void> {
  await sql(url!, `CREATE SCHEMA "${s}"; CREATE TABLE "${s}".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
  for (let i = 0; i < version; i++) {
    await sql(url!, MIGRATIONS[i]!(s))
    await sql(url!, `INSERT INTO "${s}".schema_migrations (version) VALUES ($1)`, [i + 1])
  }
}

/** The CLI from the sources, in this process: its exit code, or the code and message of the error it threw. */
async function cli(args: string[]): Promise<{ code: number | string; message: string; out: string }> {
  const out: string[] = []
  const io: Io = { out: (s) => out.push(s), err: (s) => out.push(s), style: makeStyle(false), progress: undefined }
  try {
    return { code: await main(args, {}, io), message: '', out: out.join('') }
  } catch (e) {
    if (!isSessionPersistenceError(e)) throw e
    return { code: e.code, message: e.message, out: out.join('') }
  }
}

describe.skipIf(!url)("schemaSetup: 'existing'", () => {
  test('the library: a missing schema is E_NOT_FOUND naming it and the server without its password, and is not created; an older one is refused and left at its version; a current one is used', async () => {
    const missing = schema('absent')
    const withPassword = new URL(url!)
    if (withPassword.password === '') withPassword.password = 'pw-not-shown' // trust auth: never sent
    const password = decodeURIComponent(withPassword.password)
    const store = createPostgresPersistence({ connectionString: withPassword.toString(), schema: missing, schemaSetup: 'existing', poolSize: 2 })
    stores.push(store)
    const err = await errorOf(store.list())
    expect(err.code).toBe('E_NOT_FOUND')
    expect(err.message).toContain(`"${missing}"`)
    expect(err.message).toContain(`${withPassword.hostname}:${withPassword.port}`)
    expect(err.message).not.toContain(password)
    expect((await errorOf(store.create(meta('x')))).code).toBe('E_NOT_FOUND')
    expect(await schemaExists(missing)).toBe(false)

    const old = schema('old')
    await schemaAt(old, SCHEMA_VERSION - 1)
    const reader = createPostgresPersistence({ connectionString: url!, schema: old, schemaSetup: 'existing', poolSize: 2 })
    stores.push(reader)
    const refused = await errorOf(reader.list())
    expect(refused.code).toBe('E_FORMAT_UNSUPPORTED')
    expect(refused.message).toContain(`version ${SCHEMA_VERSION - 1}`)
    expect(await versionOf(old)).toBe(SCHEMA_VERSION - 1)

    // The default still creates and migrates, and then an 'existing' store reads what it wrote.
    const writer = createPostgresPersistence({ connectionString: url!, schema: old, poolSize: 2 })
    stores.push(writer)
    await writer.create(meta('kept'))
    await writer.append('kept', turn(0, 1))
    await writer.close('kept')
    expect(await versionOf(old)).toBe(SCHEMA_VERSION)
    expect((await reader.list()).map((l) => l.meta.id)).toEqual(['kept'])
    expect((await reader.inspect('kept')).events).toHaveLength(4)

    expect((await errorOf((async () => createPostgresPersistence({ connectionString: url!, schemaSetup: 'maybe' as never }))())).code).toBe('E_CONFIG')
  })

  test('the CLI: a mistyped ?schema= is E_NOT_FOUND for verify, ls and prune and creates nothing; copy --to still creates its target schema', async () => {
    const typo = schema('typo')
    for (const args of [['verify'], ['ls'], ['prune', '--older-than', '30d'], ['verify', '--json']]) {
      const r = await cli(['--root', `${url}?schema=${typo}`, ...args])
      expect([args.join(' '), r.code]).toEqual([args.join(' '), 'E_NOT_FOUND'])
      expect(r.message).toContain(`"${typo}"`)
    }
    expect(await schemaExists(typo)).toBe(false)

    // copy reads its source as it is, and creates a missing target (as a copy into a new directory does).
    const source = schema('src')
    const p = createPostgresPersistence({ connectionString: url!, schema: source, poolSize: 2 })
    stores.push(p)
    await p.create(meta('alpha'))
    await p.append('alpha', [...turn(0, 1), ev(4, 'vendor/x', { n: 1 })])
    await p.close('alpha')
    expect((await cli(['--root', `${url}?schema=${typo}`, 'copy', '--all', '--to', `${url}?schema=${source}`])).code).toBe('E_NOT_FOUND')
    expect(await schemaExists(typo)).toBe(false)
    const target = schema('dst')
    expect((await cli(['--root', `${url}?schema=${source}`, 'copy', '--all', '--to', `${url}?schema=${target}`])).code).toBe(0)
    expect(await versionOf(target)).toBe(SCHEMA_VERSION)
    expect((await sql(url!, `SELECT line FROM "${target}".events ORDER BY seq`)).map((r) => r.line)).toEqual(
      (await sql(url!, `SELECT line FROM "${source}".events ORDER BY seq`)).map((r) => r.line),
    )
    const ls = await cli(['--root', `${url}?schema=${target}`, 'ls', '--json'])
    expect(ls.code).toBe(0)
    expect(JSON.parse(ls.out).sessions.map((s: { meta: { id: string } }) => s.meta.id)).toEqual(['alpha'])
  })

  test('the CLI: ls on a schema an older release left is refused and does not migrate it', async () => {
    const old = schema('old')
    await schemaAt(old, SCHEMA_VERSION - 1)
    for (const args of [['ls'], ['verify']]) {
      const r = await cli(['--root', `${url}?schema=${old}`, ...args])
      expect([args.join(' '), r.code]).toEqual([args.join(' '), 'E_FORMAT_UNSUPPORTED'])
      expect(r.message).toContain('older than')
    }
    expect(await versionOf(old)).toBe(SCHEMA_VERSION - 1)
  })
})
