// §15.5: `verify` on a PostgreSQL root checks each session's rows as they arrive, keeping none
// (src/postgres/check-session.ts). A session three times the size of the process's
// whole heap limit, one turn open to its end, is verified without running out of memory, with
// the verdict `inspect` gives; `inspect` of it (what `repair --dry-run` runs, and what verify ran
// before) runs out of that heap.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { sealLine } from '../src/session/line-codec.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'
import { runCliWithHeap } from './helpers/run-cli.js'

const url = pgUrl()
const HEAP_MB = 64
const SESSION_BYTES = 200 * 1024 * 1024
const schema = freshSchema('pgbig')
const ID = 'huge-open'
let events = 0

/**
 * The version-1 lines of one turn, open to the end: tool calls each answered by a 20 kB result
 * until `bytes`, then a step with one call never answered. Generated a page at a time.
 */
async function* bigOpenTurn(bytes: number, counted: { events: number }): AsyncGenerator<string[]> {
  let seq = 0
  let size = 0
  const filler = 'y'.repeat(20_000)
  const line = (type: string, data: unknown) => {
    const l = sealLine(JSON.stringify({ seq: seq++, type, time: 5_000 + seq, data }), 1)
    size += Buffer.byteLength(l) + 1
    return l
  }
  yield [line('turn/start', { turn: 1 })]
  for (let step = 0; size < bytes; ) {
    const page: string[] = []
    for (let i = 0; i < 200; i++, step++) {
      const callId = `c-${step}`
      page.push(line('assistant/message', { turn: 1, step, content: [{ type: 'tool-call', callId, name: 'read', arguments: {} }] }))
      page.push(line('tool/result', { turn: 1, step, callId, content: [{ type: 'text', text: `${step} ${filler}` }] }))
    }
    yield page
  }
  yield [line('step/start', { turn: 1, step: 'last' }), line('tool/call', { turn: 1, step: 'last', callId: 'never-answered', name: 'bash' })]
  counted.events = seq
}

beforeAll(async () => {
  if (!url) return
  const store = createPostgresPersistence({ connectionString: url, schema })
  try {
    const counted = { events: 0 }
    await store.importRawStream({ id: ID, headerLine: headerLine(meta(ID), 1).slice(0, -1), eventPages: bigOpenTurn(SESSION_BYTES, counted) })
    events = counted.events
  } finally {
    await store.end()
  }
}, 300_000)
afterAll(async () => {
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)(`verify of a PostgreSQL root with a ${SESSION_BYTES / 1024 / 1024} MiB session and a ${HEAP_MB} MiB heap`, () => {
  test('the verdict is what inspect would say; the CLI exits 0; inspect of it runs out of that heap', async () => {
    const [stored] = await sql<{ bytes: number }>(url!, `SELECT sum(octet_length(line))::float8 AS bytes FROM "${schema}".events WHERE session_id = $1`, [ID])
    expect(stored!.bytes).toBeGreaterThan(SESSION_BYTES - 1024 * 1024) // the lines a check reads are as big as asked

    const pgRoot = `${url}?schema=${schema}`
    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', pgRoot, 'verify', '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    const report = JSON.parse(stdout)
    expect(report.summary).toEqual({ logs: 1, ok: 0, repairable: 1, corrupt: 0, unsupported: 0, tempFiles: 0 })
    expect(report.logs).toEqual([
      {
        status: 'repairable',
        id: ID,
        path: `postgres:${schema}/${ID}`,
        events,
        cutBytes: 0,
        cutLines: 0,
        closers: 3, // the unanswered call's result, the open step's end, the turn's end
        droppedTurnEnds: 0,
      },
    ])

    // inspect holds every event at once: under the same heap it cannot (what made verify's memory grow).
    const inspected = await runCliWithHeap(HEAP_MB, ['--root', pgRoot, 'repair', ID, '--dry-run', '--json'])
    expect(inspected.code).not.toBe(0)
    expect(inspected.stderr).toMatch(/heap out of memory|Allocation failed/)
  }, 300_000)
})
