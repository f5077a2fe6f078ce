// The reads that still fetched a huge line whole on PostgreSQL (§15.5), now in parts as a load's:
// a tail load's compactions and rewinds (find-tail.ts), the raw stream `copy` reads
// (raw-stream.ts), and the diagnosis of a batch whose COMMIT went unanswered (append-batch.ts).
// What is observed is the protocol itself: a proxy in front of the server records the largest
// message the server sent, which holds a huge line whole only if it was fetched whole (a parted
// read's rows are a part of at most PART_BYTES each). The results stay those of a whole read.
import { createHash } from 'node:crypto'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { PART_BYTES } from '../src/postgres/line-parts.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { sealLine } from '../src/session/line-codec.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql, storedLines } from './helpers/pg-env.js'

/**
 * A loopback proxy that reads the server's side of the protocol as messages (a type byte and a
 * length) and records the largest; `cutAfter(text)` lets the next client message holding `text`
 * reach the server, then drops its answer and both sockets (a COMMIT whose outcome is unknown).
 */
class MessageProxy {
  largest = 0
  /** Bytes the server sent. */
  received = 0
  cuts = 0
  #server: Server
  #sockets = new Set<Socket>()
  #cut: { text: string; armed?: Socket } | undefined
  port = 0

  constructor(target: number) {
    this.#server = createServer((client) => this.#pipe(client, target))
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve))
    this.port = (this.#server.address() as { port: number }).port
    return this
  }

  #pipe(client: Socket, target: number): void {
    const upstream = createConnection({ host: '127.0.0.1', port: target })
    for (const s of [client, upstream]) {
      this.#sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => {
        this.#sockets.delete(s)
        client.destroy()
        upstream.destroy()
      })
    }
    client.on('data', (chunk: Buffer) => {
      if (this.#cut && !this.#cut.armed && chunk.includes(this.#cut.text)) this.#cut.armed = client
      upstream.write(chunk)
    })
    // The server's messages: 1 type byte, then a 4-byte length that counts itself.
    let need = 5
    let inHeader = true
    upstream.on('data', (chunk: Buffer) => {
      if (this.#cut?.armed === client) {
        this.#cut = undefined
        this.cuts++
        client.destroy()
        upstream.destroy()
        return
      }
      this.received += chunk.length
      let at = 0
      let header = Buffer.alloc(0)
      while (at < chunk.length) {
        if (inHeader) {
          const take = Math.min(need, chunk.length - at)
          header = Buffer.concat([header, chunk.subarray(at, at + take)])
          at += take
          need -= take
          if (need > 0) break
          const length = header.readUInt32BE(1)
          this.largest = Math.max(this.largest, length)
          header = Buffer.alloc(0)
          need = length - 4
          inHeader = false
        } else {
          const take = Math.min(need, chunk.length - at)
          at += take
          need -= take
        }
        if (!inHeader && need === 0) {
          inHeader = true
          need = 5
        }
      }
      client.write(chunk)
    })
  }

  cutAfter(text: string): void {
    this.#cut = { text }
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}

const url = pgUrl()
const schema = freshSchema('leftover')
const stores: PostgresSessionPersistence[] = []
let proxy: MessageProxy
let proxied: string
beforeAll(async () => {
  if (!url) return
  const target = new URL(url)
  proxy = await new MessageProxy(Number(target.port)).start()
  target.port = String(proxy.port)
  proxied = target.toString()
})
afterAll(async () => {
  for (const s of stores) await s.end()
  await proxy?.close()
  if (url) await dropSchemas(url, [schema])
})
const open = (options: { formatVersion?: 0 | 1; through?: 'proxy'; retryTimeoutMs?: number } = {}) => {
  const s = createPostgresPersistence({
    connectionString: options.through ? proxied : url!,
    schema,
    poolSize: options.through ? 1 : 3,
    formatVersion: options.formatVersion ?? 1,
    retryTimeoutMs: options.retryTimeoutMs,
  })
  stores.push(s)
  return s
}
/** The largest message the server sent through the proxy while `fn` ran, and all it sent. */
async function largestDuring<T>(fn: () => Promise<T>): Promise<{ value: T; largest: number; received: number }> {
  proxy.largest = 0
  proxy.received = 0
  const value = await fn()
  return { value, largest: proxy.largest, received: proxy.received }
}

/** Lines as their sizes and digests: a failed comparison prints no megabytes. */
const digests = (lines: readonly string[]) => lines.map((l) => `${Buffer.byteLength(l)} ${createHash('sha256').update(l).digest('hex').slice(0, 16)}`)
// Characters of 1 to 4 bytes, so part boundaries fall inside them.
const mixed = (bytes: number) => 'a€ü😀b'.repeat(Math.ceil(bytes / Buffer.byteLength('a€ü😀b')))
const HUGE = PART_BYTES + PART_BYTES / 2
/** A message of a parted read: one part, and what comes with it. */
const PART_MESSAGE = PART_BYTES + 64 * 1024

describe.skipIf(!url)('huge lines read in parts where a tail load, copy and an unanswered COMMIT read them', () => {
  test.each([0, 1] as const)('version %i: a tail load past huge compactions and rewinds (first page and later pages) fetches none whole', async (version) => {
    const writer = open({ formatVersion: version })
    const id = `tail-v${version}`
    const events: SessionEvent[] = []
    const push = (type: string, data?: SessionEvent['data']) => events.push({ seq: events.length, type, time: 1, ...(data === undefined ? {} : { data }) })
    for (let t = 0; t < 3; t++) {
      push('turn/start', { turn: t })
      push('user/message', { content: `q${t}` })
      push('turn/end', { turn: t, reason: { kind: 'completed' } })
    }
    push('history/compact', { summary: mixed(HUGE), firstKeptSeq: 6 }) // seq 9: in force
    // Past the first page of 8: each newer huge compaction undone by the rewind after it.
    for (let i = 0; i < 6; i++) {
      const c = events.length
      push('history/compact', { summary: mixed(HUGE + i), firstKeptSeq: c })
      push('history/rewind', { to: c })
    }
    push('turn/start', { turn: 9 })
    push('turn/end', { turn: 9, reason: { kind: 'completed' } })
    await writer.create(meta(id))
    for (const e of events) await writer.append(id, [e])
    await writer.close(id)
    const reader = open({ formatVersion: version, through: 'proxy' })
    const { value: tail, largest, received } = await largestDuring(() => reader.load(id, { from: 'last-compaction' }))
    expect(tail.firstSeq).toBe(6)
    // Each huge line of the tail (all of them) came once: the search's reads are the load's.
    const huge = events.slice(6).reduce((n, e) => n + (e.type === 'history/compact' ? Buffer.byteLength(JSON.stringify(e)) : 0), 0)
    expect(received).toBeGreaterThan(huge)
    expect(received).toBeLessThan(huge * 1.2)
    expect(digests(tail.events.map((e) => JSON.stringify(e)))).toEqual(digests(events.slice(6).map((e) => JSON.stringify(e))))
    expect(largest).toBeLessThan(PART_MESSAGE)
    await reader.close(id)
  }, 120_000)

  test('a damaged huge compaction is E_CORRUPT naming its line, as a whole read named it', async () => {
    const writer = open()
    const id = 'tail-damaged'
    await writer.create(meta(id))
    await writer.append(id, [...turn(0, 1), { seq: 4, type: 'history/compact', time: 1, data: { summary: 'x'.repeat(HUGE), firstKeptSeq: 4 } }])
    await writer.close(id)
    await sql(url!, `UPDATE "${schema}".events SET line = overlay(line placing 'Z' from ${PART_BYTES + 3} for 1) WHERE session_id = $1 AND seq = 4`, [id])
    const err = await open().load(id, { from: 'last-compaction' }).then(
      () => ({ code: 'resolved', message: '' }),
      (e: { code: string; message: string; line?: number }) => e,
    )
    expect(err).toMatchObject({ code: 'E_CORRUPT', line: 6 })
    expect(err.message).toMatch(/checksum mismatch \(seq 4\)/)
  }, 120_000)

  test.each([0, 1] as const)('version %i: the raw stream hands out each huge line alone in its page, its exact bytes, none fetched whole', async (version) => {
    const writer = open({ formatVersion: version })
    const id = `raw-v${version}`
    const results = (from: number, n: number): SessionEvent[] =>
      Array.from({ length: n }, (_, k) => ({ seq: from + k, type: 'tool/result', time: 1, data: { callId: `c${k}`, content: [{ type: 'text', text: k % 2 === 0 ? mixed(HUGE + k) : 'small' }] } }))
    const events = [...turn(0, 1), ...results(4, 5), ...turn(9, 2)]
    await writer.create(meta(id))
    await writer.append(id, events.slice(0, 4))
    for (const e of events.slice(4, 9)) await writer.append(id, [e])
    await writer.append(id, events.slice(9))
    await writer.close(id)
    const reader = open({ formatVersion: version, through: 'proxy' })
    const { value: pages, largest } = await largestDuring(async () => {
      const pages: (readonly string[])[] = []
      for await (const page of (await reader.openRawStream(id, { pageBytes: 8 * PART_BYTES })).eventPages) pages.push(page)
      return pages
    })
    const lines = events.map((e) => sealLine(JSON.stringify(e), version))
    expect(digests(pages.flat())).toEqual(digests(lines))
    expect(pages.map((p) => p.length)).toEqual([4, 1, 1, 1, 1, 1, 4])
    expect(largest).toBeLessThan(PART_MESSAGE)
    // Imported into another schema (what `copy` does): byte for byte.
    const other = createPostgresPersistence({ connectionString: url!, schema: `${schema}_copy`, poolSize: 2 })
    stores.push(other)
    expect(await other.importRawStream(await reader.openRawStream(id))).toEqual({ eventLines: events.length })
    expect(digests((await storedLines(url!, `${schema}_copy`, id)).map((l) => l.line))).toEqual(digests(lines))
    await dropSchemas(url!, [`${schema}_copy`])
  }, 120_000)

  test('the raw stream of a damaged huge line hands out the lines before it, then E_CORRUPT; a deleted session is E_NOT_FOUND', async () => {
    const writer = open()
    const id = 'raw-damaged'
    await writer.create(meta(id))
    await writer.append(id, [...turn(0, 1), { seq: 4, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text: 'y'.repeat(HUGE) }] } }])
    await writer.close(id)
    await sql(url!, `UPDATE "${schema}".events SET line = overlay(line placing E'\\n' from 100 for 1) WHERE session_id = $1 AND seq = 4`, [id])
    const seen: string[] = []
    const stream = await open().openRawStream(id)
    const failed = (async () => {
      for await (const page of stream.eventPages) seen.push(...page)
    })()
    const err = await failed.then(
      () => ({ code: 'resolved', message: '' }),
      (e: { code: string; message: string; line?: number }) => e,
    )
    expect(err).toMatchObject({ code: 'E_CORRUPT', line: 6 })
    expect(err.message).toMatch(/holds a newline/)
    expect(seen).toHaveLength(4)
    // Opened, then deleted before its huge line is read: gone, not damage.
    const gone = 'raw-gone'
    await writer.create(meta(gone))
    await writer.append(gone, [...turn(0, 1), { seq: 4, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text: 'y'.repeat(HUGE) }] } }])
    await writer.close(gone)
    const pages = (await open().openRawStream(gone, { pageLines: 4 })).eventPages[Symbol.asyncIterator]()
    expect((await pages.next()).value).toHaveLength(4)
    await writer.delete(gone)
    expect(await codeOf(pages.next())).toBe('E_NOT_FOUND')
  }, 120_000)

  test.each([
    ['retried at once', undefined],
    ['left unknown, resolved by the next append', 0],
  ] as const)('a huge batch whose COMMIT went unanswered (%s) is found stored without fetching it whole, and acknowledged once', async (_, retryTimeoutMs) => {
    const id = `unknown-${retryTimeoutMs ?? 'retry'}`
    const s = open({ through: 'proxy', retryTimeoutMs })
    await s.create(meta(id))
    const first = turn(0, 1)
    await s.append(id, first)
    const huge: SessionEvent[] = [
      { seq: 4, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text: mixed(HUGE) }] } },
      { seq: 5, type: 'note', time: 1 },
      { seq: 6, type: 'tool/result', time: 1, data: { content: [{ type: 'text', text: mixed(HUGE + 1) }] } },
    ]
    proxy.cutAfter('COMMIT')
    const cuts = proxy.cuts
    const { largest } = await largestDuring(async () => {
      const code = await codeOf(s.append(id, huge))
      if (retryTimeoutMs === 0) {
        expect(code).toBe('E_IO') // the outcome unknown: the next append resolves it
        await s.append(id, [{ seq: 7, type: 'note', time: 1 }])
      } else {
        expect(code).toBe('resolved')
        await s.append(id, [{ seq: 7, type: 'note', time: 1 }])
      }
    })
    expect(proxy.cuts).toBe(cuts + 1)
    expect(largest).toBeLessThan(PART_MESSAGE)
    const all = [...first, ...huge, { seq: 7, type: 'note', time: 1 }]
    expect(digests((await storedLines(url!, schema, id)).map((l) => l.line))).toEqual(digests(all.map((e) => sealLine(JSON.stringify(e), 1))))
    await s.close(id)
  }, 120_000)
})

describe.skipIf(!url)('a session deleted while a tail load reads its huge compaction in parts', () => {
  test('regression: the load says E_NOT_FOUND, as for a delete anywhere else in a load, never E_CORRUPT', async () => {
    const { default: pg } = await import('pg')
    const writer = open()
    const id = 'tail-deleted'
    await writer.create(meta(id))
    await writer.append(id, [...turn(0, 1), { seq: 4, type: 'history/compact', time: 1, data: { summary: 'x'.repeat(HUGE), firstKeptSeq: 4 } }, ...turn(5, 2)])
    await writer.close(id)
    // A pool whose clients, at the tail search's first parted read, let another instance delete
    // the session first (as after a lost lock): the read then finds no row.
    const pool = new pg.Pool({ connectionString: url!, max: 3 })
    let fired = false
    const before = async (args: unknown[]) => {
      const first = args[0] as string | { text?: string } | undefined
      const text = typeof first === 'string' ? first : (first?.text ?? '')
      if (!fired && text.includes('AS MATERIALIZED')) {
        fired = true
        await sql(url!, `DELETE FROM "${schema}".sessions WHERE session_id = $1`, [id])
      }
    }
    // Through the pool's own query and the clients it hands out alike.
    const poolQuery = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>
    ;(pool as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => (await before(args), poolQuery(...args))
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>
      ;(client as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => (await before(args), query(...args))
    })
    const reader = createPostgresPersistence({ pool, schema })
    const code = await codeOf(reader.load(id, { from: 'last-compaction' }))
    expect(fired).toBe(true) // the rig reached the parted read
    expect(code).toBe('E_NOT_FOUND')
    await reader.end()
    await pool.end()
  }, 120_000)
})
