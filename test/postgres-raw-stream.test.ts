// Streamed raw transfer on PostgreSQL (§15.5): a session's exact lines handed out page by page
// (bounded by lines and by bytes) and taken in page by page in one transaction, so `copy` of a
// session of any size holds one page at a time; a failed or refused stream stores nothing.
import { sealLine, unsealString } from '../src/session/line-codec.js'
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas = [freshSchema('rawsa'), freshSchema('rawsb')]
const stores: PostgresSessionPersistence[] = []
const open = (schema: string) => {
  const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
  stores.push(store)
  return store
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

async function pagesOf(stream: { eventPages: AsyncIterable<readonly string[]> }): Promise<(readonly string[])[]> {
  const pages: (readonly string[])[] = []
  for await (const page of stream.eventPages) pages.push(page)
  return pages
}

describe.skipIf(!url)('streamed raw transfer over PostgreSQL', () => {
  test('the same lines as readRaw, page by page by lines and by bytes; imported into another store byte for byte', async () => {
    const a = open(schemas[0]!)
    const b = open(schemas[1]!)
    await a.create(meta('paged', { cwd: '/p' }))
    for (let t = 0; t < 5; t++) await a.append('paged', turn(t * 4, t + 1))
    await a.append('paged', [{ seq: 20, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text: 'y'.repeat(5_000) }] } }])
    await a.close('paged')
    const raw = await a.readRaw('paged')
    const byLines = await pagesOf(await a.openRawStream('paged', { pageLines: 3 }))
    expect(byLines.map((p) => p.length)).toEqual([3, 3, 3, 3, 3, 3, 3])
    expect(byLines.flat()).toEqual(raw.eventLines)
    // By bytes: no page above 400 bytes unless it is one line; the long line alone.
    const byBytes = await pagesOf(await a.openRawStream('paged', { pageBytes: 400 }))
    expect(byBytes.flat()).toEqual(raw.eventLines)
    for (const page of byBytes) {
      const bytes = page.reduce((n, l) => n + Buffer.byteLength(l), 0)
      expect(page.length === 1 || bytes <= 400).toBe(true)
    }
    expect(byBytes.at(-1)).toEqual([raw.eventLines[20]])
    const stream = await a.openRawStream('paged', { pageLines: 7 })
    expect(stream.headerLine).toBe(raw.headerLine)
    expect(await b.importRawStream(stream)).toEqual({ eventLines: 21 })
    expect(await b.readRaw('paged')).toEqual(raw)
    expect((await b.list())[0]?.sizeBytes).toBe((await a.list())[0]?.sizeBytes)
    const loaded = await b.load('paged') // an ordinary session: it loads and appends
    await b.append('paged', turn(loaded.events.length, 9))
    await b.close('paged')
    expect(await codeOf(b.importRawStream(await a.openRawStream('paged')))).toBe('E_EXISTS')
    expect(await codeOf(a.openRawStream('missing'))).toBe('E_NOT_FOUND')
  })

  test('a stream hands out the lines before a damaged one, then E_CORRUPT; rows missing are damage, a delete meanwhile is E_NOT_FOUND', async () => {
    const a = open(schemas[0]!)
    const ids = ['raw-hurt', 'raw-short', 'raw-gone']
    for (const id of ids) {
      await a.create(meta(id))
      await a.append(id, [...turn(0, 1), ...turn(4, 2)])
      await a.close(id)
    }
    const rejection = async (stream: { eventPages: AsyncIterable<readonly string[]> }, seen: string[]) => {
      try {
        for await (const page of stream.eventPages) seen.push(...page)
        return undefined
      } catch (err) {
        return err as { code: string; line?: number; message: string }
      }
    }
    const stored = (await a.readRaw('raw-hurt')).eventLines
    // A line changed behind the package's back: its checksum fails.
    await sql(url!, `UPDATE "${schemas[0]}".events SET line = replace(line, 'question 2', 'question Z') WHERE session_id = 'raw-hurt' AND seq = 5`)
    const seen: string[] = []
    const hurt = await rejection(await a.openRawStream('raw-hurt'), seen)
    expect(hurt).toMatchObject({ code: 'E_CORRUPT', line: 7 })
    expect(seen).toEqual(stored.slice(0, 5))
    // The last rows gone while the session's row still says 8: damage, not a delete.
    await sql(url!, `DELETE FROM "${schemas[0]}".events WHERE session_id = 'raw-short' AND seq >= 6`)
    const short: string[] = []
    expect(await rejection(await a.openRawStream('raw-short'), short)).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect(short).toHaveLength(6)
    // Deleted after the stream was opened: E_NOT_FOUND.
    const opened = await a.openRawStream('raw-gone', { pageLines: 3 })
    const iterator = opened.eventPages[Symbol.asyncIterator]()
    expect((await iterator.next()).value).toHaveLength(3)
    await a.delete('raw-gone')
    expect(await iterator.next().then(() => ({ code: 'resolved' }), (e: { code: string }) => e)).toMatchObject({ code: 'E_NOT_FOUND' })
  })

  test("a caller's page of any size goes in several INSERTs: 12,000 lines in one page, and 40 MiB in one page", async () => {
    const b = open(schemas[1]!)
    const header = (id: string) => JSON.stringify({ type: 'session', version: 0, id, createdAt: 1, delegationDepth: 0 })
    const line = (seq: number, text: string) => JSON.stringify({ seq, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text } ] } })
    const many = Array.from({ length: 12_000 }, (_, i) => line(i, `r${i} ü`))
    const big = Array.from({ length: 40 }, (_, i) => line(i, `${i}`.padEnd(1024 * 1024, 'é€')))
    for (const [id, lines] of [['one-page-many', many], ['one-page-big', big]] as const) {
      const eventPages = (async function* () {
        yield lines
      })()
      expect(await b.importRawStream({ id, headerLine: header(id), eventPages })).toEqual({ eventLines: lines.length })
      expect((await b.readRaw(id)).eventLines).toEqual(lines)
      const [row] = await sql<{ length: number; size: number }>(url!, `SELECT length::int, size_bytes::float8 AS size FROM "${schemas[1]}".sessions WHERE session_id = $1`, [id])
      expect(row).toEqual({ length: lines.length, size: Buffer.byteLength(header(id)) + 1 + lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0) })
    }
  }, 120_000)

  test('a source that fails in the middle, a line that breaks the envelope, a seq out of place: nothing is stored', async () => {
    const b = open(schemas[1]!)
    const raw = await b.readRaw('paged')
    // The header of another id, sealed again (version 1: an edited line fails its checksum).
    const header = (id: string) => sealLine(unsealString(raw.headerLine)!.replace('"id":"paged"', `"id":"${id}"`), 1)
    const failing = {
      id: 'half',
      headerLine: header('half'),
      eventPages: (async function* () {
        yield raw.eventLines.slice(0, 4)
        throw new Error('source went away')
      })(),
    }
    expect(await codeOf(b.importRawStream(failing))).not.toBe('resolved')
    const refused = {
      id: 'bad',
      headerLine: header('bad'),
      eventPages: (async function* () {
        yield raw.eventLines.slice(0, 4)
        yield [sealLine('{"seq":4,"time":1}', 1)] // its checksum is right: the envelope is what is wrong
      })(),
    }
    expect(await codeOf(b.importRawStream(refused))).toBe('E_INVALID_EVENT')
    const gap = {
      id: 'gap',
      headerLine: header('gap'),
      eventPages: (async function* () {
        yield raw.eventLines.slice(0, 4)
        yield raw.eventLines.slice(5, 6)
      })(),
    }
    expect(await codeOf(b.importRawStream(gap))).toBe('E_SEQ_NOT_CONTIGUOUS') // as on JSONL and in memory
    for (const id of ['half', 'bad', 'gap']) expect(await codeOf(b.inspect(id))).toBe('E_NOT_FOUND')
    expect(await sql(url!, `SELECT 1 FROM "${schemas[1]}".events WHERE session_id IN ('half', 'bad', 'gap')`)).toEqual([])
    // Each refusal released the id: it can be imported after all.
    expect(await b.importRawStream({ id: 'half', headerLine: header('half'), eventPages: (async function* () { yield raw.eventLines.slice(0, 4) })() })).toEqual({ eventLines: 4 })
  })
})
