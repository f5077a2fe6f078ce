// A tail load and a range read of a long session touch what they return, not the log: on a table
// big enough for the planner to prefer a sequential scan if it could, the read-only queries they
// send are explained with their own parameters and must scan `events` through an index only,
// touching a bounded number of its rows.
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { headerLine } from '../src/session/meta.js'
import type { SessionEvent } from '../src/session/schema.js'
import { meta } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('scan')
let store: PostgresSessionPersistence
const EVENTS = 60_000

interface Captured {
  text: string
  values: unknown[]
}

/** Runs `fn` and returns the queries it sent through pg (text and parameters), in order. */
async function captureQueries<T>(fn: () => Promise<T>): Promise<{ result: T; queries: Captured[] }> {
  const spy = vi.spyOn(pg.Client.prototype, 'query')
  try {
    const result = await fn()
    const queries = spy.mock.calls.map((c) => {
      const q = c[0] as string | { text?: string; values?: unknown[] }
      const given = (Array.isArray(c[1]) ? c[1] : []) as unknown[]
      return typeof q === 'string' ? { text: q, values: given } : { text: String(q.text), values: q.values ?? given }
    })
    return { result, queries }
  } finally {
    spy.mockRestore()
  }
}

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Actual Rows'?: number
  'Actual Loops'?: number
  Plans?: PlanNode[]
}

/** How the queries that only read used the events table: its scans, and the rows they returned over all loops. */
async function eventsUse(queries: Captured[]): Promise<{ scans: string[]; rows: number }> {
  const client = new pg.Client({ connectionString: url! })
  await client.connect()
  const use = { scans: [] as string[], rows: 0 }
  try {
    for (const q of queries) {
      // Every statement but those with side effects outside a transaction (locks, sequences,
      // notifications) or that write lines; each is explained with ANALYZE and rolled back (the
      // claim of the session, an UPDATE of its row, carries a tail load's probes).
      const explainable = /^\s*(SELECT|WITH|UPDATE)\b/i.test(q.text) && !/\b(INSERT|DELETE|pg_notify|nextval|pg_try_advisory|pg_advisory)/i.test(q.text)
      if (!explainable) continue
      await client.query('BEGIN')
      const { rows } = await client.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, q.values)
      await client.query('ROLLBACK')
      const walk = (node: PlanNode) => {
        if (node['Relation Name'] === 'events') {
          use.scans.push(`${node['Node Type']}${node['Index Name'] ? ` using ${node['Index Name']}` : ''} in: ${q.text.replace(/\s+/g, ' ').trim()}`)
          use.rows += (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1)
        }
        for (const child of node.Plans ?? []) walk(child)
      }
      const plan = rows[0]!['QUERY PLAN'][0]! as { Plan: PlanNode; Plans?: PlanNode[] }
      walk(plan.Plan)
    }
  } finally {
    await client.end()
  }
  return use
}

/**
 * A long session: a turn every 20 events, a request header every 1,000, rewinds of one chunk in
 * every turn, a compaction near the end followed by a request header (as a host that records
 * its header again after compacting).
 */
function longLog(): SessionEvent[] {
  const events: SessionEvent[] = []
  for (let seq = 0; seq < EVENTS; seq++) {
    const at = seq % 20
    const turn = Math.floor(seq / 20)
    let e: SessionEvent
    if (seq === EVENTS - 15) e = { seq, type: 'history/compact', time: seq, data: { summary: 'everything before', firstKeptSeq: EVENTS - 40 } }
    else if (seq === EVENTS - 14) e = { seq, type: 'request/header', time: seq, data: { header: { model: 'm' }, reason: 'resume' } }
    else if (at === 0) e = { seq, type: 'turn/start', time: seq, data: { turn } }
    else if (at === 19) e = { seq, type: 'turn/end', time: seq, data: { turn, reason: { kind: 'completed' } } }
    else if (seq % 1000 === 1) e = { seq, type: 'request/header', time: seq, data: { header: { model: 'm' }, reason: 'change' } }
    else if (at % 7 === 3) e = { seq, type: 'history/rewind', time: seq, data: { to: seq - 1 } } // many rewinds: a walk must stop early
    else e = { seq, type: 'assistant/chunk', time: seq, data: { turn, step: 0, chunk: { text: `delta ${seq}` } } }
    events.push(e)
  }
  return events
}

beforeAll(async () => {
  if (!url) return
  store = createPostgresPersistence({ connectionString: url, schema, poolSize: 4 })
  const id = 'long'
  await store.importRaw({ id, headerLine: headerLine(meta(id)).slice(0, -1), eventLines: longLog().map((e) => JSON.stringify(e)) })
  for (let i = 0; i < 50; i++) {
    await store.create(meta(`short-${i}`))
    await store.append(`short-${i}`, longLog().slice(0, 40))
    await store.close(`short-${i}`)
  }
  await sql(url, `ANALYZE "${schema}".events`)
}, 120_000)

afterAll(async () => {
  await store?.end()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('no full scan of a long session', () => {
  test('a tail load: index scans only, about as many rows as it returns', async () => {
    const { result: tail, queries } = await captureQueries(() => store.load('long', { from: 'last-compaction' }))
    await store.close('long')
    expect(tail.firstSeq).toBe(EVENTS - 40) // firstKeptSeq: the last header and turn start are later
    expect(tail.events).toHaveLength(40)
    const use = await eventsUse(queries)
    expect(use.scans.length).toBeGreaterThan(0)
    for (const scan of use.scans) expect(scan).toMatch(/^Index( Only)? Scan/)
    // The tail, the three last markers, and one first page (8) of the compactions and rewinds
    // walked back from the end: the 9,000 rewinds and 6,000 turn markers before them are never touched.
    expect(use.rows).toBeLessThanOrEqual(tail.events.length + 3 + 8)
  })

  test('a full load of the same session is what reads every row (the measure can tell)', async () => {
    const { result: full, queries } = await captureQueries(() => store.load('long'))
    await store.close('long')
    expect(full.events).toHaveLength(EVENTS)
    const use = await eventsUse(queries)
    expect(use.rows).toBeGreaterThanOrEqual(EVENTS)
  })

  test('a range read deep in the log and the last events: index scans only, the rows of the range', async () => {
    for (const range of [{ fromSeq: 31_234, toSeq: 31_334 }, { last: 100 }, { fromSeq: 7, toSeq: 9 }]) {
      const { result, queries } = await captureQueries(() => store.read('long', range))
      expect(result.length).toBe(EVENTS)
      const use = await eventsUse(queries)
      expect(use.scans.length).toBeGreaterThan(0)
      for (const scan of use.scans) expect(scan).toMatch(/^Index( Only)? Scan/)
      expect(use.rows).toBe(result.events.length)
    }
  })
})
