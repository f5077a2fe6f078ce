// Schema version 3 on a store written by an earlier release: every existing line keeps its text,
// the marker lines get their kind (however their JSON is spelled), a damaged line does not stop
// the migration, and a tail load of the migrated session reads from its compaction.
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { MIGRATIONS, SCHEMA_VERSION } from '../src/postgres/migrations.js'
import { EVENT_KINDS, kindOf } from '../src/postgres/event-kinds.js'
import { TAIL_MARKER_TYPES } from '../src/session/tail-start.js'
import { headerLine } from '../src/session/meta.js'
import { toModelHistory } from '../src/session/history.js'
import { codeOf } from './helpers/codes.js'
import { meta } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
afterAll(async () => {
  if (url) await dropSchemas(url, schemas)
})

/** A schema at version 2 (the release before tail loads) holding `lines` for session `id`. */
async function versionTwoSchema(id: string, lines: string[]): Promise<string> {
  const s = freshSchema('mark')
  schemas.push(s)
  await sql(url!, `CREATE SCHEMA "${s}"; CREATE TABLE "${s}".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
  for (const [i, m] of MIGRATIONS.slice(0, 2).entries()) {
    await sql(url!, m(s))
    await sql(url!, `INSERT INTO "${s}".schema_migrations (version) VALUES ($1)`, [i + 1])
  }
  await sql(url!, `INSERT INTO "${s}".sessions (session_id, header_line, created_at, length, size_bytes, writer_epoch) VALUES ($1, $2, 1, $3, 0, 0)`, [
    id,
    headerLine(meta(id)).slice(0, -1),
    lines.length,
  ])
  await sql(url!, `INSERT INTO "${s}".events SELECT $1, o - 1, l FROM unnest($2::text[]) WITH ORDINALITY u(l, o)`, [id, lines])
  return s
}

describe.skipIf(!url)('schema version 3: the kind of each line', () => {
  test('the kinds cover exactly the types the tail finder looks for', () => {
    expect(Object.keys(EVENT_KINDS).sort()).toEqual([...TAIL_MARKER_TYPES].sort())
    expect(new Set(Object.values(EVENT_KINDS)).size).toBe(TAIL_MARKER_TYPES.length)
    expect(kindOf('assistant/chunk')).toBe(0)
  })

  test('the backfill finds every marker line, spelled any way JSON allows; other lines stay 0; the text is untouched', async () => {
    const lines = [
      '{"seq":0,"type":"request/header","time":1,"data":{"header":{"m":1},"reason":"initial"}}',
      '{"seq":1,"type":"turn/start","time":1,"data":{"turn":1}}',
      '{"seq":2,"type":"user/message","time":1,"data":{"content":"say \\"turn/end\\" please"}}',
      '{"seq":3,"time":1,"type":"turn\\/end","data":{"turn":1,"reason":{"kind":"completed"}}}', // escaped slash, type not first
      '{ "seq" : 4 , "type" : "history\\u002fcompact", "time":1, "data":{"summary":"s","firstKeptSeq":4}}', // spaces, \u escape
      '{"seq":5,"type":"assistant/chunk","time":1,"data":{"chunk":{"type":"history/rewind"}}}', // a marker name inside data only
      '{"seq":6,"type":"history/rewind","time":1,"data":{"to":5}}',
      '{"seq":7,"type":"turn/start","time":1,"data":', // damaged: not JSON (a load reports it; the migration must not fail)
    ]
    const s = await versionTwoSchema('old', lines)
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    try {
      expect(await codeOf(store.inspect('old'))).toBe('E_CORRUPT') // the migration ran, the damage is still reported
      const versions = await sql<{ v: number }>(url!, `SELECT max(version) AS v FROM "${s}".schema_migrations`)
      expect(versions[0]!.v).toBe(SCHEMA_VERSION)
      const rows = await sql<{ seq: number; kind: number; line: string }>(url!, `SELECT seq::int, kind, line FROM "${s}".events ORDER BY seq`)
      expect(rows.map((r) => r.line)).toEqual(lines)
      expect(rows.map((r) => r.kind)).toEqual([3, 1, 0, 2, 4, 0, 5, 0])
      const indexes = await sql<{ indexname: string }>(url!, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'events' ORDER BY 1`, [s])
      expect(indexes.map((i) => i.indexname)).toEqual(['events_history', 'events_markers', 'events_pkey'])
    } finally {
      await store.end()
    }
  })

  test('a migrated session loads from its compaction, and what the new release appends carries its kinds', async () => {
    const events = [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      { seq: 1, type: 'user/message', time: 1, data: { content: 'long ago' } },
      { seq: 2, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } },
      { seq: 3, type: 'request/header', time: 1, data: { header: { m: 2 }, reason: 'change' } },
      { seq: 4, type: 'history/compact', time: 1, data: { summary: 'the first turn', firstKeptSeq: 3 } },
      { seq: 5, type: 'turn/start', time: 1, data: { turn: 2 } },
      { seq: 6, type: 'user/message', time: 1, data: { content: 'now' } },
    ]
    const s = await versionTwoSchema('resumed', events.map((e) => JSON.stringify(e)))
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    try {
      const full = await store.inspect('resumed')
      const tail = await store.load('resumed', { from: 'last-compaction' })
      expect(tail.firstSeq).toBe(3)
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(full.events))
      expect(tail.repair?.closers).toEqual(full.repair?.closers) // the open turn 2 closed: a turn/end at seq 7
      await store.append('resumed', [{ seq: 8, type: 'history/compact', time: 2, data: { summary: 'all', firstKeptSeq: 8 } }])
      const kinds = await sql<{ seq: number; kind: number }>(url!, `SELECT seq::int, kind FROM "${s}".events WHERE seq >= 7 ORDER BY seq`)
      expect(kinds).toEqual([{ seq: 7, kind: 2 }, { seq: 8, kind: 4 }])
    } finally {
      await store.end()
    }
  })
})
