// Lines of a megabyte or more travel in parts on PostgreSQL (src/postgres/line-parts.ts, §15.5):
// sent into a large object of the statement's transaction, read back in byte ranges. What is
// stored and loaded is exactly what one piece gave: the JSONL line, multi-byte characters cut
// across parts included; each line is checked as a line read whole is (checksum, newline, JSON,
// seq), the first defect named first; the fence still refuses a writer that lost the session;
// no large object is left behind.
import { afterAll, describe, expect, test } from 'vitest'
import { CHECK_SESSION, type SessionCheck } from '../src/postgres/check-session.js'
import { PART_BYTES } from '../src/postgres/line-parts.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { sealLine } from '../src/session/line-codec.js'
import type { SessionEvent } from '../src/session/schema.js'
import { meta, turn } from './helpers/events.js'
import pg from 'pg'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('parted')
const stores: PostgresSessionPersistence[] = []
const open = (formatVersion: 0 | 1 = 1) => {
  const s = createPostgresPersistence({ connectionString: url!, schema, poolSize: 3, formatVersion })
  stores.push(s)
  return s
}
afterAll(async () => {
  for (const s of stores) await s.end()
  if (url) await dropSchemas(url, [schema])
})

// Characters of 1, 2, 3 and 4 bytes, so part boundaries (every PART_BYTES bytes) fall inside them.
const mixed = (bytes: number) => {
  const unit = 'a€ü😀b'
  return unit.repeat(Math.ceil(bytes / Buffer.byteLength(unit)))
}
const result = (seq: number, text: string): SessionEvent => ({
  seq,
  type: 'tool/result',
  time: seq + 1,
  data: { turn: 1, step: 0, callId: `c${seq}`, content: [{ type: 'text', text }] },
})
const storedLine = async (id: string, seq: number) =>
  (await sql<{ line: string }>(url!, `SELECT line FROM "${schema}".events WHERE session_id = $1 AND seq = $2`, [id, seq]))[0]!.line
const largeObjects = async () => (await sql<{ n: number }>(url!, 'SELECT count(*)::int AS n FROM pg_largeobject_metadata'))[0]!.n
const rejection = (p: Promise<unknown>) => p.then(() => ({ code: 'resolved' }) as { code: string; message?: string; line?: number }, (e) => e)
const check = (s: PostgresSessionPersistence, id: string) => (s as unknown as { [CHECK_SESSION]: (id: string) => Promise<SessionCheck> })[CHECK_SESSION](id)

describe.skipIf(!url)('lines of a megabyte or more on PostgreSQL, in parts', () => {
  test.each([0, 1] as const)('version %i: first and later batches stored as their JSONL lines, loaded, read and checked back', async (version) => {
    const s = open(version)
    const id = `mixed-v${version}`
    const before = await largeObjects()
    await s.create(meta(id))
    // The first batch makes the session's row (its own statement), in parts.
    const first = result(0, mixed(3 * PART_BYTES + 7))
    await s.append(id, [first])
    const small = turn(1, 1)
    // A later huge batch beside small ones of the same store: it goes alone, they are not held up.
    const second = result(5, mixed(PART_BYTES + 1))
    await s.create(meta(`${id}-other`))
    await s.append(id, small)
    await Promise.all([s.append(id, [second]), s.append(`${id}-other`, turn(0, 1))])
    const last = turn(6, 2)
    await s.append(id, last)
    for (const e of [first, second]) expect(await storedLine(id, e.seq)).toBe(sealLine(JSON.stringify(e), version))
    expect(await largeObjects()).toBe(before)
    await s.close(id)

    const reader = open(version)
    const all = [first, ...small, second, ...last]
    expect((await reader.inspect(id)).events).toEqual(all)
    expect((await reader.read(id, { fromSeq: 4, toSeq: 7 })).events).toEqual(all.slice(4, 7))
    expect(await check(reader, id)).toMatchObject({ events: all.length, repair: undefined })
    expect((await reader.readRaw(id)).eventLines).toEqual(all.map((e) => sealLine(JSON.stringify(e), version)))
    const loaded = await s.load(id)
    expect(loaded.events).toEqual(all)
    await s.close(id)
  }, 120_000)

  test.each([
    // version, what is changed in the huge line, what the error says
    [1, 'crc', `overlay(line placing 'Z' from ${PART_BYTES + 3} for 1)`, /checksum mismatch \(seq 4\)/], // a character of its second part
    [1, 'no crc', `regexp_replace(line, ',"crc":"[0-9a-f]{8}"}$', '}')`, /checksum mismatch: the line has no checksum/],
    [1, 'newline', `overlay(line placing E'\\n' from 100 for 1)`, /holds a newline/],
    [0, 'json', `regexp_replace(line, '^\\{', '[')`, /not JSON/],
    [0, 'seq', `replace(line, '"seq":4,', '"seq":9,')`, /seq 9 where 4 was expected/],
    // Text ending inside a part's last character (a continuation byte at a cut's end).
    [0, 'ends in a character', `repeat('a', ${PART_BYTES - 1}) || 'é'`, /not JSON/],
    [1, 'ends in a character', `repeat('a', ${2 * PART_BYTES - 2}) || 'é'`, /checksum mismatch: the line has no checksum/],
  ] as const)('version %i, %s: a damaged huge line is E_CORRUPT, named before a later damaged line', async (version, name, change, says) => {
    const s = open(version)
    const r = open(version)
    const id = `hurt-v${version}-${name.replaceAll(' ', '-')}`
    await s.create(meta(id))
    await s.append(id, [...turn(0, 1), result(4, 'y'.repeat(2 * PART_BYTES)), result(5, 'small')])
    await s.close(id)
    await sql(url!, `UPDATE "${schema}".events SET line = ${change} WHERE session_id = $1 AND seq = 4`, [id])
    // A later small line damaged too: the huge one comes first and is the one named.
    await sql(url!, `UPDATE "${schema}".events SET line = replace(line, '"small"', '"smell" "') WHERE session_id = $1 AND seq = 5`, [id])
    for (const read of [() => r.inspect(id), () => r.read(id, { fromSeq: 2 }), () => check(r, id), () => s.load(id)]) {
      const err = await rejection(read())
      expect(err).toMatchObject({ code: 'E_CORRUPT', line: 6 })
      expect(err.message).toMatch(says)
    }
  }, 120_000)

  test.each([0, 1] as const)('version %i: a small line damaged into digits (what a huge line is sent as) is judged as any damaged line', async (version) => {
    const s = open(version)
    const r = open(version)
    for (const digits of ['12', String(PART_BYTES), String(4 * PART_BYTES)]) {
      const id = `digits-v${version}-${digits}`
      await s.create(meta(id))
      await s.append(id, turn(0, 1))
      await s.close(id)
      await sql(url!, `UPDATE "${schema}".events SET line = $2 WHERE session_id = $1 AND seq = 2`, [id, digits])
      const says = version === 1 ? /checksum mismatch: the line has no checksum \(seq 2\)/ : /: line 4: (?!.*parts)/
      for (const read of [() => r.inspect(id), () => r.read(id, { fromSeq: 1 }), () => check(r, id)]) {
        const err = await rejection(read())
        expect(err).toMatchObject({ code: 'E_CORRUPT', line: 4 })
        expect(err.message).toMatch(says)
      }
    }
  }, 120_000)

  test('a huge line in the middle of many: verify reads on after it, one by one, in order, none missing', async () => {
    const s = open(1)
    const id = 'many'
    await s.create(meta(id))
    const events: SessionEvent[] = []
    for (let t = 0; t < 5; t++) {
      const base = t * 5
      const batch = [...turn(base, t + 1).slice(0, 3), result(base + 3, t % 2 === 0 ? 'z'.repeat(PART_BYTES + t) : 'short'), turn(base, t + 1)[3]!]
      batch[4] = { ...batch[4]!, seq: base + 4 }
      await s.append(id, batch)
      events.push(...batch)
    }
    await s.close(id)
    const r = open(1)
    expect(await check(r, id)).toMatchObject({ events: events.length, repair: undefined })
    expect((await r.inspect(id)).events).toEqual(events)
    // A row missing after a huge line is found as it is after a small one.
    await sql(url!, `DELETE FROM "${schema}".events WHERE session_id = $1 AND seq = 14`, [id])
    expect(await rejection(check(r, id))).toMatchObject({ code: 'E_CORRUPT', line: 16 })
    expect(await rejection(r.inspect(id))).toMatchObject({ code: 'E_CORRUPT', line: 16 })
  }, 120_000)

  test('watch from 0 of huge lines among small ones gives each event once, in order, as a load does', async () => {
    const s = open(1)
    const id = 'watched'
    await s.create(meta(id))
    const events: SessionEvent[] = [...turn(0, 1)]
    for (let i = 4; i < 12; i++) events.push(i % 3 === 0 ? result(i, mixed(PART_BYTES + i)) : result(i, `small ${i}`))
    await s.append(id, events.slice(0, 4))
    for (let i = 4; i < 12; i += 2) await s.append(id, events.slice(i, i + 2))
    const watcher = open(1)
    const stop = new AbortController()
    const seen: SessionEvent[] = []
    const watching = (async () => {
      for await (const e of watcher.watch(id, { fromSeq: 0, signal: stop.signal })) {
        seen.push(e)
        if (e.seq === 13) stop.abort()
      }
    })()
    // Two more, one huge, appended while it watches.
    const late = [result(12, mixed(2 * PART_BYTES)), result(13, 'last')]
    await s.append(id, late)
    await watching
    expect(seen).toEqual([...events, ...late])
    await s.close(id)
  }, 120_000)

  test('a load whose lock is lost and whose session is deleted while it reads huge lines is never E_CORRUPT', async () => {
    const writer = open(1)
    await writer.create(meta('gone'))
    for (let i = 0; i < 40; i += 4) await writer.append('gone', Array.from({ length: 4 }, (_, k) => result(i + k, 'p'.repeat(PART_BYTES + 10))))
    await writer.close('gone')
    const loader = createPostgresPersistence({ connectionString: url!, schema, poolSize: 3, host: 'parted-loader' })
    stores.push(loader)
    const admin = new pg.Client({ connectionString: url! })
    await admin.connect()
    try {
      const loading = loader.load('gone').then(
        (l) => `loaded ${l.events.length}`,
        (e: { code: string }) => e.code,
      )
      // Once the loader reads a huge line in parts: its lock connection ends and another instance deletes the session.
      let deleted: string | undefined
      for (let t = 0; t < 20_000 && deleted === undefined; t++) {
        const { rows } = await admin.query<{ pid: number; query: string }>(
          `SELECT pid, query FROM pg_stat_activity WHERE application_name = 'session-persistence-jsonl parted-loader'`,
        )
        if (!rows.some((r) => r.query.includes('MATERIALIZED'))) continue
        for (const r of rows.filter((r) => r.query.includes('advisory_lock'))) await admin.query('SELECT pg_terminate_backend($1)', [r.pid])
        // The ended connection's advisory lock goes with its backend, a moment later.
        for (let tries = 0; tries < 200 && deleted !== 'deleted'; tries++) {
          deleted = await writer.delete('gone').then(
            () => 'deleted',
            (e: { code: string }) => e.code,
          )
          if (deleted === 'E_LOCKED') await new Promise((r) => setTimeout(r, 10))
        }
      }
      expect(deleted).toBe('deleted')
      // Read as of one snapshot (all 40), or the session found gone or taken: never damage.
      expect(['loaded 40', 'E_NOT_FOUND', 'E_LOCKED']).toContain(await loading)
    } finally {
      await admin.end()
    }
  }, 120_000)

  test('verify of a session of more than one pass of rows: every event counted, a row missing in a later pass found', async () => {
    const s = open(0)
    await s.create(meta('passes'))
    const all: SessionEvent[] = []
    for (let seq = 0; seq < 10_005; seq += 1_000) {
      const batch = Array.from({ length: Math.min(1_000, 10_005 - seq) }, (_, k) => result(seq + k, `r${seq + k}`))
      await s.append('passes', batch)
      all.push(...batch)
    }
    await s.close('passes')
    expect(await check(open(0), 'passes')).toMatchObject({ events: 10_005 })
    await sql(url!, `DELETE FROM "${schema}".events WHERE session_id = 'passes' AND seq >= 10003`)
    expect(await rejection(check(open(0), 'passes'))).toMatchObject({ code: 'E_CORRUPT', line: 10_005 })
  }, 120_000)

  test('a database in another encoding (LATIN1): huge lines stored and read back as they are', async () => {
    const admin = new pg.Client({ connectionString: url! })
    await admin.connect()
    const db = `parted_latin1_${process.pid}`
    try {
      await admin.query(`CREATE DATABASE ${db} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`)
      const other = new URL(url!)
      other.pathname = `/${db}`
      for (const version of [0, 1] as const) {
        const s = createPostgresPersistence({ connectionString: other.href, schema: 'p', poolSize: 2, formatVersion: version })
        try {
          const id = `latin1-v${version}`
          await s.create(meta(id))
          const events = [...turn(0, 1), result(4, 'é'.repeat(PART_BYTES + 3)), result(5, `ü${'a'.repeat(2 * PART_BYTES)}é`)]
          await s.append(id, events)
          await s.close(id)
          expect((await s.inspect(id)).events).toEqual(events)
          expect((await s.read(id, { fromSeq: 4 })).events).toEqual(events.slice(4))
          expect(await check(s, id)).toMatchObject({ events: 6 })
        } finally {
          await s.end()
        }
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${db}`).catch(() => {})
      await admin.end()
    }
  }, 120_000)

  test('a writer that lost the session is refused a huge batch: nothing stored, no large object left', async () => {
    const a = open(1)
    await a.create(meta('taken'))
    await a.append('taken', turn(0, 1))
    const before = await largeObjects()
    // Another writer took the session over: its row carries another writer token.
    await sql(url!, `UPDATE "${schema}".sessions SET writer_epoch = writer_epoch + 1 WHERE session_id = 'taken'`)
    expect(await rejection(a.append('taken', [result(4, 'w'.repeat(2 * PART_BYTES))]))).toMatchObject({ code: 'E_LOCKED' })
    expect(await sql(url!, `SELECT seq FROM "${schema}".events WHERE session_id = 'taken'`)).toHaveLength(4)
    expect(await largeObjects()).toBe(before)
  }, 120_000)
})
