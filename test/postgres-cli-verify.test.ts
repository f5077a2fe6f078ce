// `verify` on a PostgreSQL root says of each session what `inspect` would say (ok, repairable with
// the closers a load would write, corrupt at a line, unsupported), though it checks each row as it
// arrives and keeps no event (src/postgres/check-session.ts, reached through the store's
// CHECK_SESSION hook). The oracle is the verdict `verify` built from `inspect` before.
import fc from 'fast-check'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { LoadedSession, SessionEvent } from '../src/index.js'
import { CHECK_SESSION, checkSession, type SessionCheck } from '../src/postgres/check-session.js'
import { Db } from '../src/postgres/db.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { headerLine } from '../src/session/meta.js'
import { ev, meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'
import { runCli } from './helpers/run-cli.js'
import { turnStep } from './helpers/turn-arbitraries.js'

const url = pgUrl()
const schemas: string[] = []
afterAll(async () => {
  if (url) await dropSchemas(url, schemas)
})

type Verdict = Record<string, unknown>
type Hooked = PostgresSessionPersistence & { [CHECK_SESSION](id: string): Promise<SessionCheck> }

/** The verdict of `id` as verify built it from `inspect` (the code before check-session.ts). */
async function inspectVerdict(store: PostgresSessionPersistence, id: string): Promise<Verdict> {
  const path = `postgres:${store.schema}/${id}`
  let s: LoadedSession
  try {
    s = await store.inspect(id)
  } catch (err) {
    const c = err as { code: string; message: string; line?: number; byteOffset?: number; reason?: string }
    if (c.code === 'E_FORMAT_UNSUPPORTED') return { status: 'unsupported', id, path, reason: c.message }
    return { status: 'corrupt', id, path, ...(c.line !== undefined ? { line: c.line, byteOffset: c.byteOffset } : {}), reason: c.reason ?? `${c.code}: ${c.message}` }
  }
  const r = s.repair
  if (!r) return { status: 'ok', id, path, events: s.events.length }
  return { status: 'repairable', id, path, events: s.events.length - r.closers.length, cutBytes: r.droppedBytes, cutLines: r.droppedLines, closers: r.closers.length, droppedTurnEnds: r.droppedTurnEnds }
}

/** What inspect rejects with (name, code, message and the corruption's line, offset and reason), or undefined. */
const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: Error & { code: string; line?: number; byteOffset?: number; reason?: string }) => ({ name: e.name, code: e.code, message: e.message, line: e.line, byteOffset: e.byteOffset, reason: e.reason }),
  )

const call = (callId: string, turnNo = 2, step = 0): SessionEvent =>
  ev(0, 'assistant/message', { turn: turnNo, step, content: [{ type: 'tool-call', callId, name: 'grep', arguments: {} }] })

describe.skipIf(!url)('session-jsonl verify on a PostgreSQL root: the verdicts inspect gives', () => {
  const schema = freshSchema('pgverify')
  const pgRoot = `${url}?schema=${schema}`
  let store: Hooked
  const ids: string[] = []

  beforeAll(async () => {
    schemas.push(schema)
    store = createPostgresPersistence({ connectionString: url!, schema }) as Hooked
    for (const version of [0, 1] as const) {
      const w = createPostgresPersistence({ connectionString: url!, schema, formatVersion: version })
      try {
        const write = async (id: string, events: SessionEvent[]) => {
          await w.create(meta(id))
          await w.append(id, events.map((e, seq) => ({ ...e, seq })))
          ids.push(id)
        }
        await write(`ok-v${version}`, [...turn(0, 1), ...turn(4, 2)])
        // An open turn with two calls, one answered, in an open step: its result, the step's end, the turn's end.
        await write(`open-v${version}`, [...turn(0, 1), ev(0, 'turn/start', { turn: 2 }), ev(0, 'step/start', { turn: 2, step: 0 }), call('a'), ev(0, 'tool/call', { turn: 2, step: 0, callId: 'b' }), ev(0, 'tool/result', { turn: 2, step: 0, callId: 'a' })])
        // An open step after its turn's calls were answered: the step's end, the turn's end.
        await write(`step-v${version}`, [ev(0, 'turn/start', { turn: 1 }), ev(0, 'step/start', { turn: 1, step: 3 })])
        // Damaged rows: one byte changed in a stored line (a checksum mismatch in version 1,
        // another history in version 0); a line that is not JSON; a row deleted in the middle
        // (a seq gap); the last row deleted (rows missing below the length).
        for (const kind of ['crc', 'garbage', 'gap', 'short']) await write(`${kind}-v${version}`, [...turn(0, 1), ...turn(4, 2)])
        await w.importRaw({ id: `empty-v${version}`, headerLine: headerLine(meta(`empty-v${version}`), version).slice(0, -1), eventLines: [] })
        ids.push(`empty-v${version}`)
      } finally {
        await w.end()
      }
      const s = (id: string) => `session_id = '${id}-v${version}'`
      await sql(url!, `UPDATE "${schema}".events SET line = replace(line, 'question 2', 'question 9') WHERE ${s('crc')} AND seq = 5`)
      await sql(url!, `UPDATE "${schema}".events SET line = 'garbage' WHERE ${s('garbage')} AND seq = 2`)
      await sql(url!, `DELETE FROM "${schema}".events WHERE ${s('gap')} AND seq = 3`)
      await sql(url!, `DELETE FROM "${schema}".events WHERE ${s('short')} AND seq = 7`)
    }
    // A header of a version this package does not read: list() reports it, verify says unsupported.
    await store.create(meta('future'))
    await store.append('future', turn(0, 1))
    await store.closeAll()
    await sql(url!, `UPDATE "${schema}".sessions SET header_line = replace(replace(header_line, '"version":1', '"version":2'), '"crc"', '"crx"') WHERE session_id = 'future'`)
  })
  afterAll(async () => {
    await store?.end()
  })

  test('ok (v0, v1, empty), repairable (open turn with a pending call, open step), corrupt (checksum, not JSON, seq gap, missing rows) and unsupported, in JSON and text', async () => {
    const r = await runCli(['--root', pgRoot, 'verify', '--json'])
    expect(r.code, r.stderr).toBe(1)
    const report = JSON.parse(r.stdout) as { summary: Record<string, number>; logs: Verdict[] }
    const byId = new Map(report.logs.map((v) => [(v.id as string | undefined) ?? (v.path as string), v]))
    for (const id of ids) expect(byId.get(id), id).toEqual(await inspectVerdict(store, id))
    expect(Object.fromEntries([...byId].map(([k, v]) => [k, v.status]))).toEqual({
      'ok-v0': 'ok',
      'ok-v1': 'ok',
      'empty-v0': 'ok',
      'empty-v1': 'ok',
      'crc-v0': 'ok', // version 0 has no checksums: the changed byte is another history
      'crc-v1': 'corrupt',
      'open-v0': 'repairable',
      'open-v1': 'repairable',
      'step-v0': 'repairable',
      'step-v1': 'repairable',
      'garbage-v0': 'corrupt',
      'garbage-v1': 'corrupt',
      'gap-v0': 'corrupt',
      'gap-v1': 'corrupt',
      'short-v0': 'corrupt',
      'short-v1': 'corrupt',
      [`postgres:${schema}/future`]: 'unsupported',
    })
    expect(report.summary).toEqual({ logs: 17, ok: 5, repairable: 4, corrupt: 7, unsupported: 1, tempFiles: 0 })

    // What each says, written out.
    expect(byId.get('open-v1')).toEqual({ status: 'repairable', id: 'open-v1', path: `postgres:${schema}/open-v1`, events: 9, cutBytes: 0, cutLines: 0, closers: 3, droppedTurnEnds: 0 })
    expect(byId.get('step-v0')).toMatchObject({ events: 2, closers: 2 })
    expect(byId.get('ok-v1')).toEqual({ status: 'ok', id: 'ok-v1', path: `postgres:${schema}/ok-v1`, events: 8 })
    expect(byId.get('empty-v1')).toMatchObject({ status: 'ok', events: 0 })
    expect(byId.get('crc-v1')).toMatchObject({ line: 7, byteOffset: -1, reason: expect.stringMatching(/checksum mismatch \(seq 5\)/) })
    expect(byId.get('garbage-v0')).toMatchObject({ line: 4, reason: expect.stringMatching(/^not JSON: /) })
    expect(byId.get('gap-v1')).toMatchObject({ line: 5, reason: 'seq 4 where 3 was expected' })
    expect(byId.get('short-v0')).toMatchObject({ line: 9, reason: 'rows are missing below the stored length' })
    expect(byId.get(`postgres:${schema}/future`)!.reason).toMatch(/version 2/)

    const text = await runCli(['--root', pgRoot, 'verify'])
    expect(text.code).toBe(1)
    const lines = text.stdout.split('\n')
    expect(lines).toContain('ok           ok-v0 (8 events)')
    expect(lines).toContain('repairable   open-v0: nothing to cut; would write 3 closing event(s)')
    expect(lines).toContain(`corrupt      gap-v0: postgres:${schema}/gap-v0 line 5: seq 4 where 3 was expected`)
    expect(lines.at(-2)).toBe('17 log(s): 5 ok, 4 repairable, 7 corrupt, 1 unsupported')
  })

  test("the check's errors are inspect's: E_CORRUPT (line, reason), E_FORMAT_UNSUPPORTED, E_NOT_FOUND, E_INVALID_ID", async () => {
    for (const id of ['crc-v1', 'garbage-v1', 'gap-v0', 'short-v1', 'future', 'absent', '', 'nul\u0000id']) {
      const wanted = await failure(store.inspect(id))
      expect(wanted, id).toBeDefined()
      expect(await failure(store[CHECK_SESSION](id)), id).toEqual(wanted)
    }
    expect((await failure(store[CHECK_SESSION]('absent')))!.code).toBe('E_NOT_FOUND')
    expect((await failure(store[CHECK_SESSION]('future')))!.code).toBe('E_FORMAT_UNSUPPORTED')
    expect((await failure(store[CHECK_SESSION]('nul\u0000id')))!.code).toBe('E_INVALID_ID')
  })
})


describe.skipIf(!url)('checkSession (src/postgres/check-session.ts)', () => {
  test("gives inspect's count and repair, closers included, for any events", async () => {
    const schema = freshSchema('pgcheck')
    schemas.push(schema)
    const stores = [0, 1].map((formatVersion) => createPostgresPersistence({ connectionString: url!, schema, formatVersion: formatVersion as 0 | 1 }))
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    const db = new Db(pool, { owned: false, logger: { warn: () => {} } })
    try {
      let n = 0
      const seen = new Set<string>() // the closers drawn, so that the property is seen to cover them all
      await fc.assert(
        fc.asyncProperty(fc.array(turnStep, { maxLength: 25 }), fc.constantFrom(0, 1), async (steps, version) => {
          const id = `log-${n++}`
          const events: SessionEvent[] = steps.map((s, seq) => (s.data === undefined ? { seq, type: s.type, time: 10 + seq } : { seq, type: s.type, time: 10 + seq, data: s.data as SessionEvent['data'] }))
          const w = stores[version]!
          if (events.length > 0) {
            await w.create(meta(id))
            await w.append(id, events)
            await w.close(id)
          } else await w.importRaw({ id, headerLine: headerLine(meta(id), version as 0 | 1).slice(0, -1), eventLines: [] })
          const inspected = await stores[0]!.inspect(id)
          const checked = await checkSession(db, schema, id, `postgres:${schema}/${id}`)
          const closers = inspected.repair?.closers.length ?? 0
          for (const c of inspected.repair?.closers ?? []) seen.add(c.type)
          if (inspected.repair?.closers.some((c) => c.type === 'step/end' && (c.data as { step?: unknown }).step !== null)) seen.add('a numbered step')
          expect(checked.events).toBe(inspected.events.length - closers)
          expect(checked.header.version).toBe(version)
          if (inspected.repair) {
            const { persisted, ...report } = inspected.repair
            expect(persisted).toBe(false)
            expect(checked.repair).toEqual(report)
          } else expect(checked.repair).toBeUndefined()
        }),
        { numRuns: 80, seed: 15 },
      )
      expect([...seen].sort()).toEqual(['a numbered step', 'step/end', 'tool/result', 'turn/end'])
    } finally {
      for (const s of stores) await s.end()
      await pool.end()
    }
  })
})
