// Byte-identical copies between a JSONL root and PostgreSQL, both ways (readRaw/importRaw), and
// the plugin running unchanged over the PostgreSQL backend.
import { readFile } from 'node:fs/promises'
import { afterAll, describe, expect, test } from 'vitest'
import { createJsonlPersistence, jsonlPath, type SessionEvent, sessionPersistencePlugin } from '../src/index.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { createReferenceHost } from '../src/testing/index.js'
import { oneTurn } from './helpers/plugin-setup.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'
import { tmpRoot } from './helpers/tmp-root.js'

const url = pgUrl()
const schemas: string[] = []
const stores: PostgresSessionPersistence[] = []
function pgStore(): PostgresSessionPersistence {
  const schema = freshSchema('copy')
  schemas.push(schema)
  const s = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
  stores.push(s)
  return s
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

const T0 = 1_700_000_000_000
// Unicode, line and paragraph separators, escapes, lone-looking escapes, extra fields and meta.
const META = {
  id: 'Copy/ünïcødé 🚀',
  createdAt: T0,
  cwd: '/wörk/项目',
  delegationDepth: 0,
  model: { name: 'm\u2028x', tags: ['a', '"q"', '\\'] },
  empty: '',
}
const EVENTS: SessionEvent[] = [
  { seq: 0, type: 'turn/start', time: T0, data: { turn: 1 } },
  { seq: 1, type: 'user/message', time: T0 + 1, data: { content: 'line\u2028sep\u2029para\nnew\ttab "quote" \\ back \u0000 nul \u001f' } },
  { seq: 2, type: 'vendor/x', time: 1.5e-7, data: { emoji: '👩‍💻', surrogates: '\ud83d\ude00', big: 1e300, neg: -0.5 }, ignorable: true, extra: { keep: [1, 'two', null] } },
  { seq: 3, type: 'assistant/message', time: T0 + 3, data: { turn: 1, step: 0, content: [{ type: 'text', text: '</script><!-- \u00e9' }] } },
  { seq: 4, type: 'turn/end', time: T0 + 4, data: { turn: 1, reason: { kind: 'completed' } } },
]

describe.skipIf(!url)('byte-identical copy between JSONL and PostgreSQL', () => {
  test('JSONL → PostgreSQL → JSONL: the file comes back byte for byte; PostgreSQL stores the exact lines', async () => {
    const rootA = await tmpRoot()
    const rootB = await tmpRoot()
    const a = createJsonlPersistence({ root: rootA })
    await a.create(META)
    await a.append(META.id, EVENTS)
    await a.close(META.id)
    const original = await readFile(jsonlPath(a.locate(META)), 'utf8')

    const pg = pgStore()
    await pg.importRaw(await a.readRaw(META.id))
    const rows = await sql<{ line: string }>(url!, `SELECT line FROM "${pg.schema}".events WHERE session_id = $1 ORDER BY seq`, [META.id])
    const head = await sql<{ header_line: string }>(url!, `SELECT header_line FROM "${pg.schema}".sessions WHERE session_id = $1`, [META.id])
    expect([head[0]!.header_line, ...rows.map((r) => r.line)].map((l) => `${l}\n`).join('')).toBe(original)

    const b = createJsonlPersistence({ root: rootB })
    await b.importRaw(await pg.readRaw(META.id))
    expect(await readFile(jsonlPath(b.locate(META)), 'utf8')).toBe(original)
    expect(await pg.inspect(META.id)).toEqual(await a.inspect(META.id))
    expect((await pg.list())[0]).toMatchObject({ meta: META, sizeBytes: Buffer.byteLength(original) })
  })

  test('PostgreSQL → JSONL → PostgreSQL: what PostgreSQL wrote is the line the JSONL backend writes', async () => {
    const pg = pgStore()
    await pg.create(META)
    await pg.append(META.id, EVENTS.slice(0, 2))
    await pg.append(META.id, EVENTS.slice(2))
    await pg.close(META.id)
    const root = await tmpRoot()
    const j = createJsonlPersistence({ root })
    await j.importRaw(await pg.readRaw(META.id))
    const copied = await readFile(jsonlPath(j.locate(META)), 'utf8')
    const direct = createJsonlPersistence({ root: await tmpRoot() })
    await direct.create(META)
    await direct.append(META.id, EVENTS)
    await direct.close(META.id)
    expect(copied).toBe(await readFile(jsonlPath(direct.locate(META)), 'utf8'))
    const back = pgStore()
    await back.importRaw(await j.readRaw(META.id))
    expect(await back.readRaw(META.id)).toEqual(await pg.readRaw(META.id))
  })

  test('importRaw refuses bad logs with their code and stores nothing', async () => {
    const pg = pgStore()
    const header = JSON.stringify({ type: 'session', version: 0, id: 'bad', createdAt: T0, delegationDepth: 0 })
    const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code)
    // the same codes as the JSONL and in-memory backends (src/session/raw-log.ts)
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header, eventLines: ['{"seq":1,"type":"x","time":1}'] }))).toBe('E_SEQ_NOT_CONTIGUOUS')
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header, eventLines: [5 as never] }))).toBe('E_CORRUPT')
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header, eventLines: ['not json'] }))).toBe('E_CORRUPT')
    expect(await codeOf(pg.importRaw({ id: 'other', headerLine: header, eventLines: [] }))).toBe('E_INVALID_META') // a header naming another id
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header.replace('"version":0', '"version":3'), eventLines: [] }))).toBe('E_FORMAT_UNSUPPORTED')
    expect(await codeOf(pg.importRaw({ id: 'nul\u0000id', headerLine: header, eventLines: [] }))).toBe('E_INVALID_ID')
    // A lone surrogate has no UTF-8 form: stored, it would come back as U+FFFD, not byte for byte.
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header, eventLines: ['{"seq":0,"type":"x","time":1,"s":"\ud800"}'] }))).toBe('E_CORRUPT')
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header.replace('}', ',"m":"\udc00"}'), eventLines: [] }))).toBe('E_CORRUPT')
    expect(await pg.list()).toEqual([])
    await pg.importRaw({ id: 'bad', headerLine: header, eventLines: ['{"seq":0,"type":"x","time":1}'] })
    expect(await codeOf(pg.importRaw({ id: 'bad', headerLine: header, eventLines: [] }))).toBe('E_EXISTS')
    expect((await pg.readRaw('bad')).eventLines).toEqual(['{"seq":0,"type":"x","time":1}'])
  })
})

describe.skipIf(!url)('the plugin over the PostgreSQL backend, unchanged', () => {
  test('a hosted session is stored event for event and resumes after a restart', async () => {
    const persistence = pgStore()
    const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: 10_000 })
    const errors: unknown[] = []
    plugin.on('error', (e) => errors.push(e))
    const host = createReferenceHost({ cwd: '/project' })
    await plugin.apply(host)
    const s = host.startSession()
    s.runTurn(oneTurn(1))
    s.runTurn(oneTurn(2))
    await plugin.flush(s.meta.id)
    await plugin.dispose()
    expect(errors).toEqual([])
    const again = createPostgresPersistence({ connectionString: url!, schema: persistence.schema })
    stores.push(again)
    const loaded = await again.load(s.meta.id)
    expect(loaded.events).toEqual(s.events)
    expect(loaded.repair).toBeUndefined()
    await again.close(s.meta.id)
  })
})
