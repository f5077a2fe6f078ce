// watch on PostgreSQL (§15.3): LISTEN/NOTIFY on one listening connection per store, a slow
// safety poll for changes that send no notification. The safety poll is set to a minute in most
// tests, so what arrives sooner than that arrived by a notification. The deadlines below only
// bound a wait for what must come (20–30 s, well inside that minute): a loaded machine may take
// seconds for a round trip, and a deadline is no measurement.
import { sealLine } from '../src/session/line-codec.js'
import { afterAll, describe, expect, test } from 'vitest'
import pg from 'pg'
import { changeChannel, changePayload } from '../src/postgres/change-feed.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { headerLine } from '../src/session/meta.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('watch')
const stores: PostgresSessionPersistence[] = []
const open = (watchPollMs = 60_000) => {
  const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4, watchPollMs })
  stores.push(store)
  return store
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, [schema])
})

const turns = (seq: number, first: number, n: number) => Array.from({ length: n }, (_, i) => turn(seq + 4 * i, first + i)).flat()
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Collects what a watch yields, until it ends; `until(n)` waits (with a deadline) for n events. */
function collect(iterable: AsyncIterable<SessionEvent>) {
  const seen: SessionEvent[] = []
  const ended = (async () => {
    try {
      for await (const e of iterable) seen.push(e)
      return 'ended'
    } catch (err) {
      return `rejected ${(err as { code?: string }).code}` // e.g. E_DISPOSED when its store ends first
    }
  })()
  return {
    seen,
    ended,
    async until(n: number, ms = 30_000) {
      const deadline = Date.now() + ms
      while (seen.length < n && Date.now() < deadline) await sleep(10)
      return seen
    },
    async endedWithin(ms: number) {
      return Promise.race([ended, sleep(ms).then(() => 'still running')])
    },
  }
}

/** The backends of the database listening on the schema's channel. */
async function listeners(): Promise<number> {
  const rows = await sql<{ n: number }>(url!, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${changeChannel(schema)}"`])
  return rows[0]!.n
}

describe.skipIf(!url)('watch over PostgreSQL', () => {
  test('two watchers (from 0 and from the middle) of one store, on one listening connection, see each event another store appends once and in order', async () => {
    const writer = open()
    const reader = open()
    await writer.create(meta('live'))
    const all = turns(0, 1, 12)
    await writer.append('live', all.slice(0, 8))
    const stop = new AbortController()
    const fromStart = collect(reader.watch('live', { signal: stop.signal }))
    const fromMiddle = collect(reader.watch('live', { fromSeq: 6, signal: stop.signal }))
    await fromStart.until(8)
    await fromMiddle.until(2)
    expect(await listeners()).toBe(1) // one connection for both watchers; the writer listens to nothing
    for (let t = 3; t <= 12; t++) {
      const at = Date.now()
      await writer.append('live', all.slice((t - 1) * 4, t * 4))
      await fromStart.until(t * 4)
      expect(Date.now() - at).toBeLessThan(30_000) // by notification: the safety poll is a minute away
    }
    await fromMiddle.until(all.length - 6)
    expect(fromStart.seen).toEqual(all)
    expect(fromMiddle.seen).toEqual(all.slice(6))
    stop.abort()
    expect(await fromStart.endedWithin(20_000)).toBe('ended')
    expect(await fromMiddle.endedWithin(20_000)).toBe('ended')
    // The last watcher gone, the listening connection goes too.
    for (let i = 0; i < 100 && (await listeners()) > 0; i++) await sleep(20)
    expect(await listeners()).toBe(0)
    await writer.close('live')
  })

  test('sessions whose batches share one group statement each wake their own watchers', async () => {
    const writer = open()
    const reader = open()
    const ids = ['g0', 'g1', 'g2', 'g3', 'g4', 'g5']
    const logs = ids.map(() => turns(0, 1, 6))
    for (const [i, id] of ids.entries()) {
      await writer.create(meta(id))
      await writer.append(id, logs[i]!.slice(0, 4))
    }
    const stop = new AbortController()
    const watchers = ids.map((id) => collect(reader.watch(id, { signal: stop.signal })))
    for (const w of watchers) await w.until(4)
    // Appended all at once: while one statement runs, the others' batches wait and share the next.
    await Promise.all(ids.map(async (id, i) => {
      for (let t = 1; t < 6; t++) await writer.append(id, logs[i]!.slice(t * 4, t * 4 + 4))
    }))
    for (const [i, w] of watchers.entries()) expect(await w.until(24, 20_000)).toEqual(logs[i])
    stop.abort()
    for (const id of ids) await writer.close(id)
  })

  test('a watcher of a session that does not exist yet gets all of it once it is created; it ends when the session is deleted', async () => {
    const writer = open()
    const reader = open()
    const w = collect(reader.watch('later'))
    await sleep(200)
    expect(w.seen).toEqual([])
    await writer.create(meta('later'))
    const events = turns(0, 1, 2)
    await writer.append('later', events.slice(0, 4))
    await writer.append('later', events.slice(4))
    await writer.close('later')
    expect(await w.until(8, 20_000)).toEqual(events)
    await writer.delete('later')
    expect(await w.endedWithin(20_000)).toBe('ended')
  })

  test('a watcher ends when its session is deleted and created again before it looks, even with the same header: it never goes on into the new session', async () => {
    const writer = open()
    const reader = open()
    // Deletes `id` and puts the session `by` in its place under `id`, with `id`'s own header
    // line, in one transaction: no watcher can see the session missing in between.
    const replace = async (id: string, by: string) => {
      const client = new pg.Client({ connectionString: url! })
      await client.connect()
      try {
        await client.query('BEGIN')
        const { rows } = await client.query<{ h: string }>(`SELECT header_line AS h FROM "${schema}".sessions WHERE session_id = $1`, [id])
        await client.query(`DELETE FROM "${schema}".sessions WHERE session_id = $1`, [id])
        await client.query(`UPDATE "${schema}".sessions SET session_id = $1, header_line = $2 WHERE session_id = $3`, [id, rows[0]!.h, by])
        await client.query(`UPDATE "${schema}".events SET session_id = $1 WHERE session_id = $2`, [id, by])
        await client.query('SELECT pg_notify($1, $2)', [changeChannel(schema), changePayload(id)])
        await client.query('COMMIT')
      } finally {
        await client.end()
      }
    }
    // 'again-legacy' is a row from before schema version 4 (no incarnation); its replacement has one.
    for (const [id, longer] of [['again', true], ['again-short', false], ['again-legacy', true]] as const) {
      const first = turns(0, 1, 2)
      await writer.create(meta(id))
      await writer.append(id, first)
      await writer.close(id)
      if (id === 'again-legacy') await sql(url!, `UPDATE "${schema}".sessions SET incarnation = NULL WHERE session_id = $1`, [id])
      const w = collect(reader.watch(id))
      expect(await w.until(8, 20_000)).toEqual(first)
      const by = `${id}-next`
      const second = longer ? turns(0, 10, 3) : turns(0, 10, 1)
      await writer.create(meta(by))
      await writer.append(by, second)
      await writer.close(by)
      await replace(id, by)
      expect(await w.endedWithin(20_000)).toBe('ended')
      expect(w.seen).toEqual(first)
      // A new watcher follows the new session, from its start.
      const after = collect(reader.watch(id))
      expect(await after.until(second.length, 20_000)).toEqual(second)
      await writer.delete(id)
      expect(await after.endedWithin(20_000)).toBe('ended')
    }
  })

  test('a fork and an imported session wake the watchers waiting for them', async () => {
    const writer = open()
    const reader = open()
    await writer.create(meta('parent'))
    const events = turns(0, 1, 2)
    await writer.append('parent', events)
    await writer.close('parent')
    const child = collect(reader.watch('child'))
    const imported = collect(reader.watch('imported'))
    await sleep(100)
    await writer.fork('parent', { id: 'child', seedLength: 4 })
    await writer.close('child')
    const lines = events.slice(4).map((e) => ({ ...e, seq: e.seq - 4 })).map((e) => JSON.stringify(e))
    await writer.importRaw({ id: 'imported', headerLine: headerLine(meta('imported')).slice(0, -1), eventLines: lines })
    expect(await child.until(4, 20_000)).toEqual(events.slice(0, 4))
    expect(await imported.until(4, 20_000)).toEqual(lines.map((l) => JSON.parse(l)))
    await writer.delete('child')
    await writer.delete('imported')
    expect(await child.endedWithin(20_000)).toBe('ended')
    expect(await imported.endedWithin(20_000)).toBe('ended')
  })

  test('after the writer is gone with a turn open, the load that repairs it shows the watcher the closers', async () => {
    const writer = open()
    const repairer = open()
    const reader = open()
    await writer.create(meta('crashed'))
    const open1: SessionEvent[] = [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      { seq: 1, type: 'assistant/message', time: 2, data: { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'c1', name: 'sh', arguments: {} }] } },
    ]
    await writer.append('crashed', open1)
    const stop = new AbortController()
    const w = collect(reader.watch('crashed', { signal: stop.signal }))
    await w.until(2)
    await writer.end() // its connections (and lock) gone, the turn still open
    const loaded = await repairer.load('crashed')
    expect(loaded.repair?.closers.map((c) => c.type)).toEqual(['tool/result', 'turn/end'])
    expect(await w.until(4, 20_000)).toEqual([...open1, ...loaded.repair!.closers])
    stop.abort()
    await repairer.close('crashed')
  })

  test('a change that sends no notification (plain SQL, an older release) arrives by the safety poll', async () => {
    const writer = open()
    const reader = open(150)
    await writer.create(meta('quiet-sql'))
    await writer.append('quiet-sql', turns(0, 1, 1))
    await writer.close('quiet-sql')
    const stop = new AbortController()
    const w = collect(reader.watch('quiet-sql', { signal: stop.signal }))
    await w.until(4)
    const line = sealLine(JSON.stringify({ seq: 4, type: 'note', time: 5 }), 1) // the session is version 1
    await sql(url!, `INSERT INTO "${schema}".events (session_id, seq, line) VALUES ('quiet-sql', 4, $1); UPDATE "${schema}".sessions SET length = 5 WHERE session_id = 'quiet-sql'`.replace('$1', `'${line}'`))
    expect((await w.until(5, 20_000)).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
    stop.abort()
    expect(await w.endedWithin(20_000)).toBe('ended')
  })

  test('rows damaged by hand: one missing below the stored length, a line of digits — the watch rejects E_CORRUPT as read does, never polls on for ever', async () => {
    // A missing row left the page starting past the next seq: the loop passed over it and polled
    // again at once (about 1,500 queries a second); a damaged line of digits reads as the size of
    // a long line and the watch stopped advancing without a word (a hunt's finds).
    const writer = open()
    for (const [id, damage] of [
      ['gap-row', `DELETE FROM "${schema}".events WHERE session_id = 'gap-row' AND seq = 2`],
      ['digit-line', `UPDATE "${schema}".events SET line = '99999999' WHERE session_id = 'digit-line' AND seq = 2`],
    ] as const) {
      await writer.create(meta(id))
      await writer.append(id, turns(0, 1, 1))
      await writer.close(id)
      await sql(url!, damage)
      expect(await codeOf(writer.read(id, { fromSeq: 0 }))).toBe('E_CORRUPT')
      const w = collect(open().watch(id))
      expect([id, await w.endedWithin(20_000), w.seen.map((e) => e.seq)]).toEqual([id, 'rejected E_CORRUPT', [0, 1]])
    }
  })

  test('an aborted signal ends the watch, one aborted before it starts yields nothing; it never holds up the writer', async () => {
    const writer = open()
    const reader = open()
    await writer.create(meta('abort'))
    await writer.append('abort', turns(0, 1, 1))
    const stop = new AbortController()
    const w = collect(reader.watch('abort', { signal: stop.signal }))
    await w.until(4)
    // A watcher that is not reading (paused at its last event) takes nothing a writer needs.
    const paused = reader.watch('abort')[Symbol.asyncIterator]()
    expect((await paused.next()).value).toMatchObject({ seq: 0 })
    const at = Date.now()
    for (let t = 2; t <= 5; t++) await writer.append('abort', turns((t - 1) * 4, t, 1))
    expect(Date.now() - at).toBeLessThan(30_000) // a writer held up by a watcher would wait for good
    await paused.return?.()
    await w.until(20)
    stop.abort()
    expect(await w.endedWithin(20_000)).toBe('ended')
    expect(w.seen).toHaveLength(20)
    const before = collect(reader.watch('abort', { signal: AbortSignal.abort() }))
    expect(await before.endedWithin(20_000)).toBe('ended')
    expect(before.seen).toEqual([])
    await writer.close('abort')
  })

  test('a notification names the session by a hash of its id, never the id or a line', async () => {
    const writer = open()
    const client = new pg.Client({ connectionString: url! })
    await client.connect()
    try {
      const heard: { channel: string; payload?: string }[] = []
      client.on('notification', (n) => heard.push(n))
      await client.query(`LISTEN "${changeChannel(schema)}"`)
      await writer.create(meta('secret-project-name'))
      await writer.append('secret-project-name', turns(0, 1, 1))
      await writer.append('secret-project-name', turns(4, 2, 1))
      await writer.close('secret-project-name')
      await writer.delete('secret-project-name')
      for (let i = 0; i < 500 && heard.length < 3; i++) await sleep(20)
      expect(heard.map((n) => n.payload)).toEqual(Array(3).fill(changePayload('secret-project-name')))
      expect(changePayload('secret-project-name')).toMatch(/^[0-9a-f]{32}$/)
    } finally {
      await client.end()
    }
  })

  test('bad options are E_CONFIG and bad ids E_INVALID_ID, before anything is read', async () => {
    const reader = open()
    const first = async (id: string, options: unknown) => {
      for await (const _ of reader.watch(id, options as never)) break
    }
    for (const bad of [{ fromSeq: -1 }, { fromSeq: 1.5 }, { fromSeq: '2' }, { signal: 'stop' }, null]) {
      expect(await codeOf(first('x', bad))).toBe('E_CONFIG')
    }
    expect(await codeOf(first('', {}))).toBe('E_INVALID_ID')
    expect(await codeOf(first('nul\u0000', {}))).toBe('E_INVALID_ID')
  })
})
