// A load from the last compaction on PostgreSQL (§15.1) is a full load's history, repair and
// next seq, read from a tail: random logs with turns, tool calls, chunks, request headers,
// compactions (some undone by rewinds, some inside an open turn) and an open final turn.
import fc from 'fast-check'
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { toModelHistory } from '../src/session/history.js'
import type { SessionEvent } from '../src/session/schema.js'
import { tailStartOf } from '../src/session/tail-start.js'
import { codeOf } from './helpers/codes.js'
import { meta } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('tail')
const stores: PostgresSessionPersistence[] = []
const open = (formatVersion?: 0 | 1) => {
  const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4, formatVersion })
  stores.push(store)
  return store
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, [schema])
})

type Step =
  | { kind: 'turn'; calls: number; answered: number; chunks: number; open: boolean }
  | { kind: 'header' }
  | { kind: 'compact'; keep: number }
  | { kind: 'rewind'; to: number }
  | { kind: 'note' }

/** A fraction of the log so far, evenly spread (fc.double favours its bounds). */
const fraction = fc.integer({ min: 0, max: 1000 }).map((n) => n / 1000)

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('turn' as const), calls: fc.nat(2), answered: fc.nat(2), chunks: fc.nat(3), open: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'header' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compact' as const), keep: fraction }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rewind' as const), to: fraction }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'note' as const }) },
)

/**
 * A log from steps. A turn marked `open` stays open only when it is the last turn: then the
 * steps after it (compactions, headers, rewinds) land inside it, as a host that compacts mid-turn
 * writes them.
 */
function buildLog(steps: Step[]): SessionEvent[] {
  const events: SessionEvent[] = []
  const push = (type: string, data?: SessionEvent['data']) => {
    const e: SessionEvent = { seq: events.length, type, time: 1_000 + events.length }
    if (data !== undefined) e.data = data
    events.push(e)
  }
  const lastTurn = steps.map((s) => s.kind).lastIndexOf('turn')
  let turnNo = 0
  for (const [i, s] of steps.entries()) {
    switch (s.kind) {
      case 'turn': {
        const t = ++turnNo
        push('turn/start', { turn: t })
        push('user/message', { content: `question ${t}` })
        push('step/start', { turn: t, step: 0 })
        for (let c = 0; c < s.chunks; c++) push('assistant/chunk', { turn: t, step: 0, chunk: { text: `part ${c}` } })
        const ids = Array.from({ length: s.calls }, (_, c) => `t${t}c${c}`)
        push('assistant/message', {
          turn: t,
          step: 0,
          content: [{ type: 'text', text: `answer ${t}` }, ...ids.map((callId) => ({ type: 'tool-call', callId, name: 'sh', arguments: { n: t } }))],
        })
        for (const callId of ids.slice(0, s.answered)) {
          push('tool/result', { turn: t, step: 0, callId, content: [{ type: 'text', text: `ran ${callId}` }] })
        }
        if (s.open && i === lastTurn) break
        push('step/end', { turn: t, step: 0 })
        push('turn/end', { turn: t, reason: { kind: 'completed' } })
        break
      }
      case 'header':
        push('request/header', { header: { model: 'm', at: events.length }, reason: events.length === 0 ? 'initial' : 'change' })
        break
      case 'compact':
        push('history/compact', { summary: `summary at ${events.length}`, firstKeptSeq: Math.floor(s.keep * events.length) })
        break
      case 'rewind':
        if (events.length > 0) push('history/rewind', { to: Math.floor(s.to * (events.length - 1)) })
        break
      case 'note':
        push('note', { text: 'vocabulary the package does not know' })
        break
    }
  }
  return events
}

let sessionNo = 0

/** A compaction in force, then an open last turn with a call unanswered: a tail load closes it. */
const TAIL_WITH_CLOSERS: Step[] = [
  { kind: 'turn', calls: 1, answered: 1, chunks: 1, open: false },
  { kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false },
  { kind: 'compact', keep: 0.9 },
  { kind: 'turn', calls: 1, answered: 0, chunks: 1, open: true },
]
/** A compaction that a later rewind undoes: the tail load starts at seq 0. */
const COMPACTION_UNDONE: Step[] = [
  { kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false },
  { kind: 'compact', keep: 0.9 },
  { kind: 'rewind', to: 0.1 },
]

describe.skipIf(!url)('load from the last compaction on PostgreSQL', () => {
  test('random logs: the tail load gives the full load history view and repair, and the next append lands at the same seq', async () => {
    const a = open()
    const seen = { tails: 0, closed: 0, undone: 0 }
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 14 }), fc.boolean(), async (steps, closeOpenTurn) => {
        const events = buildLog(steps)
        fc.pre(events.length > 0) // a session without events is never stored
        const n = sessionNo++
        const [fullId, tailId] = [`full-${n}`, `tail-${n}`]
        // Two batches: the first creates the session's row, the second goes through the group
        // statement; both carry markers.
        const half = Math.ceil(events.length / 2)
        for (const id of [fullId, tailId]) {
          await a.create(meta(id))
          await a.append(id, events.slice(0, half))
          if (half < events.length) await a.append(id, events.slice(half))
          await a.close(id)
        }
        const full = await a.load(fullId, { closeOpenTurn })
        const tail = await a.load(tailId, { from: 'last-compaction', closeOpenTurn })
        // Where it starts: the shared finder over the stored events (0 when no compaction is in force).
        expect(tail.firstSeq).toBe(tailStartOf(events))
        expect(full.firstSeq).toBe(0)
        expect(tail.events).toEqual(full.events.slice(tail.firstSeq))
        expect(tail.events.map((e) => e.seq)).toEqual(full.events.slice(tail.firstSeq).map((e) => e.seq))
        expect(toModelHistory(tail.events)).toEqual(toModelHistory(full.events))
        expect(tail.repair).toEqual(full.repair)
        if (tail.firstSeq > 0) seen.tails++
        if (tail.firstSeq > 0 && tail.repair) seen.closed++
        if (events.some((e) => e.type === 'history/compact') && tail.firstSeq === 0) seen.undone++
        // The next append lands at the same seq on both, and a wrong seq is refused on both.
        const next = full.events.length
        expect(tail.firstSeq + tail.events.length).toBe(next)
        for (const id of [fullId, tailId]) {
          expect(await codeOf(a.append(id, [{ seq: next + 1, type: 'note', time: 1 }]))).toBe('E_SEQ_NOT_CONTIGUOUS')
          await a.append(id, [{ seq: next, type: 'note', time: 1 }])
          await a.close(id)
        }
        expect((await a.inspect(tailId)).events).toEqual((await a.inspect(fullId)).events)
      }),
      {
        numRuns: 100,
        // One log of each kind the counts below require, whatever the seed draws: left to the
        // generator, no tail with closers came in 1 of 20,000 seeds (about 8.7 a run on average).
        examples: [
          [TAIL_WITH_CLOSERS, true],
          [COMPACTION_UNDONE, false],
        ],
      },
    )
    // The logs exercised what they are for: tails past seq 0, some with closers, and compactions not in force.
    expect(seen.tails).toBeGreaterThan(10)
    expect(seen.closed).toBeGreaterThan(0)
    expect(seen.undone).toBeGreaterThan(0)
  })

  test('a compaction undone by a later rewind is not in force; a later one is; one inside an open turn keeps the turn start', async () => {
    const a = open()
    const log = buildLog([
      { kind: 'header' },
      { kind: 'turn', calls: 1, answered: 1, chunks: 1, open: false },
      { kind: 'compact', keep: 0.5 }, // seq 9, keeps from 4
      { kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false },
      { kind: 'compact', keep: 0.9 }, // seq 16, keeps from 14
      { kind: 'rewind', to: 0.9 }, // seq 17, to 15: undoes the compaction at 16
    ])
    expect(log.map((e) => e.type).slice(16, 18)).toEqual(['history/compact', 'history/rewind'])
    await a.create(meta('undone'))
    await a.append('undone', log)
    await a.close('undone')
    const tail = await a.load('undone', { from: 'last-compaction' })
    expect(tail.firstSeq).toBe(0) // the compaction at 9 is in force: min(4, header 0)
    await a.close('undone')

    const inTurn = buildLog([
      { kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false },
      { kind: 'turn', calls: 2, answered: 1, chunks: 2, open: true }, // seq 6.., left open
      { kind: 'header' },
      { kind: 'compact', keep: 1 },
    ])
    await a.create(meta('in-turn'))
    await a.append('in-turn', inTurn)
    await a.close('in-turn')
    const full = await a.inspect('in-turn')
    const open2 = await a.load('in-turn', { from: 'last-compaction' })
    expect(open2.firstSeq).toBe(6) // the open turn's start, before the header (seq 13) and firstKeptSeq (14)
    expect(open2.repair?.closers).toEqual(full.repair?.closers)
    expect(open2.repair?.closers.map((c) => c.seq)).toEqual([15, 16, 17]) // the unanswered call, step/end, turn/end
    expect(toModelHistory(open2.events)).toEqual(toModelHistory(full.events))
    await a.close('in-turn')
  })

  test('the compaction in force found past many newer compactions and rewinds (the walk pages on)', async () => {
    const a = open()
    const events: SessionEvent[] = []
    const push = (type: string, data?: SessionEvent['data']) => events.push({ seq: events.length, type, time: 1, ...(data === undefined ? {} : { data }) })
    push('request/header', { header: { m: 1 }, reason: 'initial' })
    for (let t = 0; t < 5; t++) {
      push('turn/start', { turn: t })
      push('user/message', { content: `q${t}` })
      push('turn/end', { turn: t, reason: { kind: 'completed' } })
    }
    push('history/compact', { summary: 'in force', firstKeptSeq: 10 }) // seq 16
    push('request/header', { header: { m: 2 }, reason: 'change' }) // seq 17
    for (let i = 0; i < 30; i++) {
      const c = events.length
      push('history/compact', { summary: `undone ${i}`, firstKeptSeq: c }) // each undone by the rewind after it
      push('history/rewind', { to: c })
      push('history/rewind', { to: c + 1 }) // and a rewind that undoes nothing
    }
    await a.create(meta('deep'))
    await a.append('deep', events)
    await a.close('deep')
    expect(tailStartOf(events)).toBe(10)
    const tail = await a.load('deep', { from: 'last-compaction' })
    expect(tail.firstSeq).toBe(10)
    expect(toModelHistory(tail.events)).toEqual(toModelHistory(events))
    await a.close('deep')
  })

  test('rows written without a kind (an older release, plain SQL) get theirs from the trigger; the tail load sees them', async () => {
    const a = open(0) // an older release writes version 0
    await a.create(meta('old-host'))
    const log = buildLog([{ kind: 'header' }, { kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false }])
    await a.append('old-host', log)
    await a.close('old-host')
    // What a release before schema version 3 sends: no kind column.
    const lines = [
      { seq: 7, type: 'history/compact', time: 1, data: { summary: 'old host summary', firstKeptSeq: 6 } },
      { seq: 8, type: 'note', time: 1 },
    ].map((e) => JSON.stringify(e))
    await sql(url!, `INSERT INTO "${schema}".events (session_id, seq, line) SELECT 'old-host', 6 + ord, l FROM unnest($1::text[]) WITH ORDINALITY AS u(l, ord)`, [lines])
    await sql(url!, `UPDATE "${schema}".sessions SET length = 9 WHERE session_id = 'old-host'`)
    const kinds = await sql<{ seq: number; kind: number }>(url!, `SELECT seq::int, kind FROM "${schema}".events WHERE session_id = 'old-host' AND seq >= 6 ORDER BY seq`)
    expect(kinds).toEqual([{ seq: 6, kind: 2 }, { seq: 7, kind: 4 }, { seq: 8, kind: 0 }])
    const tail = await a.load('old-host', { from: 'last-compaction' })
    expect(tail.firstSeq).toBe(0) // the header at 0 is the earliest marker
    expect(toModelHistory(tail.events).messages[0]).toMatchObject({ compaction: true, content: 'old host summary' })
    await a.close('old-host')
  })

  test('E_SESSION_LIVE, E_NOT_FOUND and a bad from are refused as for a full load, without taking the lock', async () => {
    const a = open()
    const b = open()
    await a.create(meta('live'))
    await a.append('live', buildLog([{ kind: 'turn', calls: 0, answered: 0, chunks: 0, open: false }, { kind: 'compact', keep: 1 }]))
    expect(await codeOf(a.load('live', { from: 'last-compaction' }))).toBe('E_SESSION_LIVE')
    const locked = await b.load('live', { from: 'last-compaction' }).catch((e: unknown) => e as { code: string; holder?: unknown })
    expect(locked).toMatchObject({ code: 'E_LOCKED', holder: { pid: process.pid, host: expect.any(String), since: expect.any(Number) } })
    expect(await codeOf(b.load('nobody', { from: 'last-compaction' }))).toBe('E_NOT_FOUND')
    await a.close('live')
    expect(await codeOf(b.load('live', { from: 'tail' as never }))).toBe('E_CONFIG')
    const loaded = await b.load('live', { from: 'last-compaction' })
    expect(loaded.firstSeq).toBe(6)
    expect(loaded.events).toEqual([{ seq: 6, type: 'history/compact', time: 1_006, data: { summary: 'summary at 6', firstKeptSeq: 6 } }])
    await b.close('live')
  })
})
