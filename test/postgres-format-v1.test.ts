// Format version 1 on PostgreSQL (§16): sessions are written in their version (the configured
// one when created, the header's when loaded, the parent's when forked, the lines' own when
// imported raw); every reader checks a version-1 line's checksum and strips it, so a row damaged
// by hand or by a bad restore is E_CORRUPT 'checksum mismatch' wherever it lies; the configured
// redact runs before serialization; the kind column's SQL still reads sealed lines.
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { headerLine } from '../src/session/meta.js'
import { sealLine, unsealString } from '../src/session/line-codec.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf, rejection } from './helpers/codes.js'
import { ev, meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('fmtv1')
const stores: PostgresSessionPersistence[] = []
const open = (extra: Record<string, unknown> = {}) => {
  const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4, watchPollMs: 100, ...extra })
  stores.push(store)
  return store
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, [schema])
})

const rows = (id: string) =>
  sql<{ seq: number; line: string; kind: number }>(url!, `SELECT seq::int, line, kind FROM "${schema}".events WHERE session_id = $1 ORDER BY seq`, [id])
const headerOf = async (id: string) =>
  (await sql<{ header_line: string }>(url!, `SELECT header_line FROM "${schema}".sessions WHERE session_id = $1`, [id]))[0]!.header_line
/** Changes one stored line by SQL, keeping it JSON with the right envelope and seq: only its checksum can tell. */
const damage = (id: string, seq: number, from: string, to: string) =>
  sql(url!, `UPDATE "${schema}".events SET line = replace(line, $3, $4) WHERE session_id = $1 AND seq = $2`, [id, seq, from, to])

async function collect(it: AsyncIterable<SessionEvent>, n: number, ms = 20_000): Promise<SessionEvent[] | { code: string }> {
  const seen: SessionEvent[] = []
  const stop = AbortSignal.timeout(ms)
  try {
    for await (const e of it) {
      seen.push(e)
      if (seen.length >= n || stop.aborted) break
    }
    return seen
  } catch (err) {
    return err as { code: string }
  }
}

describe.skipIf(!url)('format version 1 on PostgreSQL', () => {
  test('new sessions are written in the configured version: 1 by default (header and every line sealed), 0 when asked; readers strip the checksum', async () => {
    const v1 = open()
    const v0 = open({ formatVersion: 0 })
    const events = [...turn(0, 1), ev(4, 'vendor/x', { s: 'ünï\u2028"\\' })]
    await v1.create(meta('one'))
    await v1.append('one', events)
    await v0.create(meta('zero'))
    await v0.append('zero', events.map((e) => ({ ...e })))
    expect(await headerOf('one')).toBe(headerLine(meta('one'), 1).slice(0, -1))
    expect(await headerOf('zero')).toBe(headerLine(meta('zero'), 0).slice(0, -1))
    expect((await rows('one')).map((r) => r.line)).toEqual(events.map((e) => sealLine(JSON.stringify(e), 1)))
    expect((await rows('zero')).map((r) => r.line)).toEqual(events.map((e) => JSON.stringify(e)))
    // The kinds are those of the events, sealed or not.
    expect((await rows('one')).map((r) => r.kind)).toEqual([1, 0, 0, 2, 0])
    const size = await sql<{ size: number }>(url!, `SELECT size_bytes::int AS size FROM "${schema}".sessions WHERE session_id = 'one'`)
    expect(size[0]!.size).toBe(Buffer.byteLength(headerLine(meta('one'), 1)) + events.reduce((n, e) => n + Buffer.byteLength(sealLine(JSON.stringify(e), 1)) + 1, 0))
    await v1.closeAll()
    await v0.closeAll()

    const reader = open()
    for (const id of ['one', 'zero']) {
      expect((await reader.inspect(id)).events).toEqual(events)
      expect((await reader.read(id, { fromSeq: 1, toSeq: 3 })).events).toEqual(events.slice(1, 3))
      expect(await collect(reader.watch(id), events.length)).toEqual(events)
      const listed = (await reader.list()).find((l) => l.meta.id === id)
      expect(listed?.meta).toEqual(meta(id))
      const loaded = await reader.load(id)
      expect(loaded.events).toEqual(events)
      expect(loaded.events.some((e) => 'crc' in e)).toBe(false)
      await reader.close(id)
    }
  })

  test('a session keeps its version for life: a loaded one appends (and closes its turn) in its header\'s version, a fork is written in its parent\'s', async () => {
    const old = open({ formatVersion: 0 })
    await old.create(meta('old'))
    await old.append('old', [...turn(0, 1), ev(4, 'turn/start', { turn: 2 }), ev(5, 'user/message', { content: 'open' })])
    await old.close('old')
    const fresh = open() // configured for version 1
    const loaded = await fresh.load('old')
    expect(loaded.repair?.closers.map((c) => c.type)).toEqual(['turn/end'])
    await fresh.append('old', turn(7, 3))
    await fresh.close('old')
    expect((await rows('old')).every((r) => !r.line.includes('"crc"'))).toBe(true)
    expect(await headerOf('old')).toBe(headerLine(meta('old'), 0).slice(0, -1))

    const forked = await old.fork('old', { id: 'old-fork', seedLength: 4 })
    await old.append('old-fork', turn(4, 2))
    await old.close('old-fork')
    expect(JSON.parse(await headerOf('old-fork'))).toMatchObject({ version: 0, parentSession: 'old' })
    expect((await rows('old-fork')).every((r) => !r.line.includes('"crc"'))).toBe(true)
    expect(forked.parentSession).toBe('old')

    await fresh.create(meta('new'))
    await fresh.append('new', turn(0, 1))
    await fresh.close('new')
    await old.fork('new', { id: 'new-fork', seedLength: 4 }) // a version-0 store forks a version-1 parent in version 1
    await old.append('new-fork', turn(4, 2))
    await old.close('new-fork')
    expect(JSON.parse(unsealString(await headerOf('new-fork'))!)).toMatchObject({ version: 1, parentSession: 'new' })
    expect((await rows('new-fork')).every((r) => unsealString(r.line) !== undefined)).toBe(true)
    const empty = await old.fork('new', { id: 'new-empty', seedLength: 0 })
    expect(empty.seedLength).toBe(0)
    await old.append('new-empty', turn(0, 1)) // its row is created with its first batch, in version 1
    await old.close('new-empty')
    expect(unsealString(await headerOf('new-empty'))).toBeDefined()
    expect((await rows('new-empty')).every((r) => unsealString(r.line) !== undefined)).toBe(true)
  })

  test('a row changed by SQL is E_CORRUPT "checksum mismatch" naming its line, for every reader; version 0 cannot tell', async () => {
    const w = open()
    const w0 = open({ formatVersion: 0 })
    const log: SessionEvent[] = [
      ...turn(0, 1),
      ev(4, 'history/compact', { summary: 'summary one', firstKeptSeq: 4 }),
      ...turn(5, 2),
    ]
    for (const [store, id] of [[w, 'hurt'], [w, 'hurt-marker'], [w0, 'hurt-v0']] as const) {
      await store.create(meta(id))
      await store.append(id, log)
      await store.close(id)
    }
    await damage('hurt', 6, 'question 2', 'question 3') // a tail row (seq 6 = line 8)
    await damage('hurt-marker', 4, 'summary one', 'summary two') // the compaction a tail load reads first
    await damage('hurt-v0', 6, 'question 2', 'question 3')

    const r = open()
    const corrupt = await rejection(r.load('hurt'))
    expect(corrupt).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect(corrupt.message).toContain('checksum mismatch')
    expect(corrupt.message).toContain('seq 6')
    expect(await rejection(r.load('hurt', { from: 'last-compaction' }))).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect(await rejection(r.load('hurt-marker', { from: 'last-compaction' }))).toMatchObject({ code: 'E_CORRUPT', line: 6 })
    expect(await rejection(r.load('hurt-marker'))).toMatchObject({ code: 'E_CORRUPT', line: 6 })
    expect(await rejection(r.inspect('hurt'))).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect((await rejection(r.read('hurt', { fromSeq: 5 }))).message).toContain('checksum mismatch')
    expect((await r.read('hurt', { fromSeq: 0, toSeq: 6 })).events).toEqual(log.slice(0, 6)) // the damage lies outside the range
    expect(await rejection(r.readRaw('hurt'))).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    const stream = await r.openRawStream!('hurt', { pageLines: 2 })
    const pages = (async () => {
      for await (const _ of stream.eventPages) void _
    })()
    expect(await rejection(pages)).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect(await collect(r.watch('hurt'), log.length)).toMatchObject({ code: 'E_CORRUPT' })
    expect(await codeOf(r.fork('hurt', { id: 'hurt-fork', seedLength: 4 }))).toBe('resolved') // its fork point's line is intact
    await r.close('hurt-fork')
    // A fork reads its seed as inspect reads it (§4.7): a damaged line inside the seed refuses
    // the fork (E_CORRUPT naming it, as on JSONL), and no child is stored.
    expect(await rejection(r.fork('hurt-marker', { id: 'hurt-marker-fork', seedLength: 9 }))).toMatchObject({ code: 'E_CORRUPT', line: 6 })
    expect(await codeOf(r.inspect('hurt-marker-fork'))).toBe('E_NOT_FOUND')
    await damage('hurt', 8, 'completed', 'completes')
    expect((await rejection(r.fork('hurt', { id: 'hurt-fork-2', seedLength: 9 }))).message).toContain('checksum mismatch')
    // Version 0 has no checksum: the same change loads as a different history (the documented baseline).
    const silent = await r.load('hurt-v0')
    expect((silent.events[6]!.data as { content: string }).content).toBe('question 3')
    await r.close('hurt-v0')

    // A header: damaged, or its version digit flipped, is E_CORRUPT (a sealed header is checked whatever its version says).
    await w.create(meta('bad-head'))
    await w.append('bad-head', turn(0, 1))
    await w.close('bad-head')
    await sql(url!, `UPDATE "${schema}".sessions SET header_line = replace(header_line, '"version":1', '"version":0') WHERE session_id = 'bad-head'`)
    const head = await rejection(r.load('bad-head'))
    expect(head).toMatchObject({ code: 'E_CORRUPT', line: 1 })
    expect(head.message).toContain('checksum mismatch')
    const problems: { code: string; path: string }[] = []
    const listed = await r.list({ onProblem: (p) => problems.push(p) })
    expect(listed.map((l) => l.meta.id)).not.toContain('bad-head')
    expect(problems.filter((p) => p.path.endsWith('/bad-head')).map((p) => p.code)).toEqual(['E_CORRUPT'])
    expect(await codeOf(r.read('bad-head'))).toBe('E_CORRUPT')
    expect(await codeOf(r.openRawStream!('bad-head'))).toBe('E_CORRUPT')
    // A version-1 line whose checksum field is gone.
    await w.create(meta('no-crc'))
    await w.append('no-crc', turn(0, 1))
    await w.close('no-crc')
    await sql(url!, `UPDATE "${schema}".events SET line = regexp_replace(line, ',"crc":"[0-9a-f]{8}"}$', '}') WHERE session_id = 'no-crc' AND seq = 2`)
    const missing = await rejection(r.load('no-crc'))
    expect(missing).toMatchObject({ code: 'E_CORRUPT', line: 4 })
    expect(missing.message).toContain('checksum mismatch')
  })

  test('importRaw keeps the lines\' version byte for byte; a version-1 line that fails its checksum is refused, nothing stored', async () => {
    const w0 = open({ formatVersion: 0 })
    const w1 = open()
    await w0.create(meta('raw0'))
    await w0.append('raw0', turn(0, 1))
    await w1.create(meta('raw1'))
    await w1.append('raw1', turn(0, 1))
    await w0.closeAll()
    await w1.closeAll()
    const raw0 = await w1.readRaw('raw0')
    const raw1 = await w0.readRaw('raw1')
    expect(raw1.eventLines.every((l) => unsealString(l) !== undefined)).toBe(true)
    const to0 = { id: 'raw1-copy', headerLine: sealLine(unsealString(raw1.headerLine)!.replace('"id":"raw1"', '"id":"raw1-copy"'), 1), eventLines: raw1.eventLines }
    const to1 = { id: 'raw0-copy', headerLine: raw0.headerLine.replace('"id":"raw0"', '"id":"raw0-copy"'), eventLines: raw0.eventLines }
    await w0.importRaw(to0) // a version-0 store keeps version-1 lines
    await w1.importRaw(to1) // and a version-1 store version-0 lines
    expect(await w1.readRaw('raw1-copy')).toEqual(to0)
    expect(await w0.readRaw('raw0-copy')).toEqual(to1)
    // A loaded copy appends in its own version.
    await w0.load('raw1-copy')
    await w0.append('raw1-copy', turn(4, 2))
    await w0.close('raw1-copy')
    expect((await rows('raw1-copy')).every((r) => unsealString(r.line) !== undefined)).toBe(true)

    const flipped = raw1.eventLines.map((l, i) => (i === 1 ? l.replace('question 1', 'question 9') : l))
    const bad = { ...to0, id: 'raw-bad', headerLine: sealLine(unsealString(raw1.headerLine)!.replace('"id":"raw1"', '"id":"raw-bad"'), 1), eventLines: flipped }
    const refused = await rejection(w1.importRaw(bad))
    expect(refused.code).toBe('E_CORRUPT')
    expect(refused.message).toContain('checksum mismatch')
    const unsealed = { ...bad, eventLines: raw0.eventLines } // version-0 lines under a version-1 header
    expect(await codeOf(w1.importRaw(unsealed))).toBe('E_CORRUPT')
    const streamed = await rejection(
      w1.importRawStream!({ id: 'raw-bad', headerLine: bad.headerLine, eventPages: (async function* () { yield flipped })() }),
    )
    expect(streamed.code).toBe('E_CORRUPT')
    expect(await sql(url!, `SELECT 1 FROM "${schema}".sessions WHERE session_id = 'raw-bad'`)).toEqual([])
  })

  test('redact runs on each event before it is serialized; a redactor that throws or moves a seq refuses the batch; the config is checked', async () => {
    const secret = 'sk-live-0123456789'
    const redact = (e: SessionEvent): SessionEvent => JSON.parse(JSON.stringify(e).replaceAll(secret, '[REDACTED]')) as SessionEvent
    const w = open({ redact })
    await w.create(meta('secret'))
    const given = [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: `my key is ${secret}` })]
    await w.append('secret', given)
    expect((given[1]!.data as { content: string }).content).toContain(secret) // the caller's event is untouched
    const stored = await rows('secret')
    expect(stored.map((r) => r.line).join('\n')).not.toContain(secret)
    expect(stored[1]!.line).toBe(sealLine(JSON.stringify(redact(given[1]!)), 1))

    const throwing = open({ redact: () => { throw new Error('no') } })
    await throwing.create(meta('throws'))
    expect(await rejection(throwing.append('throws', [ev(0, 'turn/start', { turn: 1 })]))).toMatchObject({ code: 'E_INVALID_EVENT' })
    const moving = open({ redact: (e: SessionEvent) => ({ ...e, seq: e.seq + 1 }) })
    await moving.create(meta('moves'))
    const moved = await rejection(moving.append('moves', [ev(0, 'turn/start', { turn: 1 })]))
    expect(moved).toMatchObject({ code: 'E_INVALID_EVENT' })
    expect(moved.message).toContain('redact changed the seq')
    expect(await sql(url!, `SELECT 1 FROM "${schema}".sessions WHERE session_id IN ('throws', 'moves')`)).toEqual([])
    // Not applied to the closers a load writes (they hold no caller content).
    await w.append('secret', [ev(2, 'user/message', { content: 'still open' })])
    await w.close('secret')

    for (const bad of [{ formatVersion: 2 }, { formatVersion: '1' }, { redact: 'nope' }]) {
      let code = 'none'
      try {
        createPostgresPersistence({ connectionString: url!, schema, ...bad } as never)
      } catch (err) {
        code = (err as { code: string }).code
      }
      expect(code).toBe('E_CONFIG')
    }
  })

  test('the kind column\'s SQL reads sealed lines: event_kind and the trigger for inserts that do not name a kind', async () => {
    const w = open()
    await w.create(meta('kinds'))
    await w.append('kinds', [...turn(0, 1), ev(4, 'history/compact', { summary: 's', firstKeptSeq: 4 })])
    await w.close('kinds')
    const computed = await sql<{ kind: number; computed: number }>(
      url!,
      `SELECT kind, "${schema}".event_kind(line) AS computed FROM "${schema}".events WHERE session_id = 'kinds' ORDER BY seq`,
    )
    expect(computed.map((r) => r.computed)).toEqual([1, 0, 0, 2, 4])
    expect(computed.map((r) => r.kind)).toEqual([1, 0, 0, 2, 4])
    // What an operator's SQL (or an older host's insert) sends: no kind; the trigger computes it from the sealed line.
    const rewind = sealLine(JSON.stringify({ seq: 5, type: 'history/rewind', time: 1, data: { toSeq: 4 } }), 1)
    await sql(url!, `INSERT INTO "${schema}".events (session_id, seq, line) VALUES ('kinds', 5, $1)`, [rewind])
    await sql(url!, `UPDATE "${schema}".sessions SET length = 6 WHERE session_id = 'kinds'`)
    expect((await rows('kinds'))[5]!.kind).toBe(5)
    const r = open()
    expect((await r.inspect('kinds')).events).toHaveLength(6)
  })
})
