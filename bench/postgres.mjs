// `npm run bench:postgres [-- --quick] [-- --append-only] [-- --runs=N]`: the PostgreSQL backend against its floors, on one
// throwaway PostgreSQL 15 (fsync on) started here, in one run. Every figure is a median over
// >= 5 runs with contenders interleaved (the order rotates each run); min–max shown. The
// concurrent sections run each contender once, untimed, before the runs they report. The server
// first writes and checkpoints ~1 GB of WAL, as a server in service would have (serveWarm).
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { createJsonlPersistence } from '../dist/index.js'
import { createPostgresPersistence } from '../dist/postgres/index.js'
import { startThrowawayPostgres } from '../dist/torture/postgres-server.js'
import { cleanup, events, now, peakRssBytes, scratch, stats } from './lib.mjs'

if (process.argv[2] === '--load-child') {
  await loadChild(process.argv[3], process.argv[4])
  process.exit(0)
}

const quick = process.argv.includes('--quick')
// Only the batch-10 append section (the package in format versions 1 and 0 against its floors).
const appendOnly = process.argv.includes('--append-only')
// `--runs=N`: more runs for a small difference (the A/B of format versions) to stand out of the noise.
const RUNS = Number(process.argv.find((a) => a.startsWith('--runs='))?.slice(7)) || (quick ? 5 : 7)
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))
const results = []
function report(name, values, unit, target) {
  const s = stats(values)
  const met = target ? (target[0] === '<=' ? s.median <= target[1] : s.median >= target[1]) : undefined
  results.push({ name, unit, ...s, target, met })
  const t = target ? `  target ${target[0]} ${target[1]} ${met ? 'met' : 'MISSED'}` : ''
  console.log(`${name.padEnd(58)} ${fmt(s.median).padStart(10)} ${unit.padEnd(9)} (${fmt(s.min)}–${fmt(s.max)})${t}`)
}
const rotate = (xs, k) => xs.map((_, i) => xs[(i + k) % xs.length])

const server = await startThrowawayPostgres()
const url = server.url
const dirs = []
try {
  body: {
  await serveWarm(url)
  const lines = (from, n) => events(from, n).map((e) => JSON.stringify(e))

  // --- batch 10: one durable append of 10 pre-serialized lines
  {
    const raw = new pg.Client({ connectionString: url, options: '-c synchronous_commit=on' })
    raw.on('error', () => {})
    await raw.connect()
    await raw.query(`CREATE TABLE raw_events (session_id text, seq bigint, line text, PRIMARY KEY (session_id, seq))`)
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_append', poolSize: 2 })
    // The same append in format version 0 (§16): what version 1's checksum costs on this path.
    // The two versions swap schemas (tables) from run to run: the schema a contender writes to
    // weighs a few % on its own (measured: both stores in version 0, 1.02–1.05x apart).
    const store1b = createPostgresPersistence({ connectionString: url, schema: 'bench_append0', poolSize: 2 })
    const v1Stores = [store, store1b]
    const v0Stores = [
      createPostgresPersistence({ connectionString: url, schema: 'bench_append0', poolSize: 2, formatVersion: 0 }),
      createPostgresPersistence({ connectionString: url, schema: 'bench_append', poolSize: 2, formatVersion: 0 }),
    ]
    const root = scratch('pg-jsonl')
    dirs.push(root)
    const jsonl = createJsonlPersistence({ root })
    const N = quick ? 100 : 200
    let session = 0
    // Interleaved per batch (the order rotating), so the disk's slow and fast moments fall on
    // every contender alike: one run is N batches of each, timed one by one.
    const got = { package: [], package0: [], raw: [], jsonl: [] }
    for (let r = 0; r < RUNS; r++) {
      const ids = { package: `a${session}`, package0: `z${session}`, raw: `r${session}`, jsonl: `j${session}` }
      session++
      const s1 = v1Stores[r % 2]
      const store0 = v0Stores[r % 2]
      await s1.create({ id: ids.package, createdAt: 1, delegationDepth: 0 })
      await s1.append(ids.package, events(0, 10))
      await store0.create({ id: ids.package0, createdAt: 1, delegationDepth: 0 })
      await store0.append(ids.package0, events(0, 10))
      await jsonl.create({ id: ids.jsonl, createdAt: 1, delegationDepth: 0 })
      await jsonl.append(ids.jsonl, events(0, 10))
      const batches = Array.from({ length: N + 1 }, (_, i) => lines(i * 10, 10))
      const spent = { package: 0, package0: 0, raw: 0, jsonl: 0 }
      const one = {
        package: (i) => s1.append(ids.package, events(i * 10, 10)),
        package0: (i) => store0.append(ids.package0, events(i * 10, 10)),
        raw: (i) =>
          raw.query(
            'INSERT INTO raw_events (session_id, seq, line) SELECT $1, $2::bigint + u.ord - 1, u.line FROM unnest($3::text[]) WITH ORDINALITY AS u(line, ord)',
            [ids.raw, i * 10, batches[i]],
          ),
        jsonl: (i) => jsonl.append(ids.jsonl, events(i * 10, 10)),
      }
      for (let i = 1; i <= N; i++) {
        for (const k of rotate(Object.keys(one), i + r)) {
          const t = now()
          await one[k](i)
          spent[k] += now() - t
        }
      }
      for (const k of Object.keys(spent)) got[k].push(spent[k] / N)
      await s1.close(ids.package)
      await store0.close(ids.package0)
      await jsonl.close(ids.jsonl)
    }
    report('append batch 10: package (format version 1)', got.package, 'ms')
    report('append batch 10: package, formatVersion 0', got.package0, 'ms')
    report('append batch 10: package version 1 / version 0', got.package.map((p, i) => p / got.package0[i]), 'x', ['<=', 1.03])
    report('append batch 10: raw pg multi-row INSERT (floor)', got.raw, 'ms')
    report('append batch 10: JSONL backend', got.jsonl, 'ms')
    report('append batch 10: package / raw INSERT', got.package.map((p, i) => p / got.raw[i]), 'x', ['<=', 1.3])
    report('append batch 10: package / JSONL', got.package.map((p, i) => p / got.jsonl[i]), 'x')
    for (const st of [...v1Stores, ...v0Stores]) await st.end()
    await raw.end()
  }
  if (appendOnly) break body

  // --- concurrent sessions: events/s
  for (const sessions of [16, 64]) {
    const store = createPostgresPersistence({ connectionString: url, schema: `bench_conc${sessions}`, poolSize: sessions })
    const root = scratch('pg-conc')
    dirs.push(root)
    const jsonl = createJsonlPersistence({ root })
    // Long enough (0.2–0.5 s a run) that the first statements, sent before any batch waits to
    // share one, do not weigh on the figure.
    const BATCHES = quick ? 40 : 100
    let round = 0
    const run = async (p) => {
      const ids = Array.from({ length: sessions }, (_, i) => `c${round}-${i}`)
      round++
      for (const id of ids) {
        await p.create({ id, createdAt: 1, delegationDepth: 0 })
        await p.append(id, events(0, 10))
      }
      const t = now()
      await Promise.all(ids.map(async (id) => {
        for (let b = 1; b <= BATCHES; b++) await p.append(id, events(b * 10, 10))
      }))
      const seconds = (now() - t) / 1000
      await p.closeAll()
      return (sessions * BATCHES * 10) / seconds
    }
    // What a backend without group commit could reach: as many raw connections, each a
    // multi-row INSERT per batch (the package shares statements between sessions instead).
    const clients = await Promise.all(Array.from({ length: sessions }, async () => {
      const c = new pg.Client({ connectionString: url, options: '-c synchronous_commit=on' })
      c.on('error', () => {})
      await c.connect()
      return c
    }))
    await clients[0].query(`CREATE TABLE IF NOT EXISTS raw_conc (session_id text, seq bigint, line text, PRIMARY KEY (session_id, seq))`)
    const rawRun = async () => {
      const tag = `r${sessions}-${round++}`
      const t = now()
      await Promise.all(clients.map(async (c, i) => {
        for (let b = 1; b <= BATCHES; b++) {
          await c.query(
            'INSERT INTO raw_conc (session_id, seq, line) SELECT $1, $2::bigint + u.ord - 1, u.line FROM unnest($3::text[]) WITH ORDINALITY AS u(line, ord)',
            [`${tag}-${i}`, b * 10, lines(b * 10, 10)],
          )
        }
      }))
      return (sessions * BATCHES * 10) / ((now() - t) / 1000)
    }
    // One untimed round of each first: a contender's first run also pays for JIT compilation
    // and, for the package, its new connections and their first plans of the append statement
    // (one run measured the package's first run at 0.58x its later ones, the JSONL backend's at
    // 0.86x).
    for (const k of ['package', 'jsonl', 'raw']) await (k === 'raw' ? rawRun() : run(k === 'package' ? store : jsonl))
    const got = { package: [], jsonl: [], raw: [] }
    for (let r = 0; r < RUNS; r++) {
      for (const k of rotate(['package', 'jsonl', 'raw'], r)) got[k].push(k === 'raw' ? await rawRun() : await run(k === 'package' ? store : jsonl))
    }
    await Promise.all(clients.map((c) => c.end()))
    report(`${sessions} sessions concurrently: package`, got.package, 'events/s')
    report(`${sessions} sessions concurrently: raw pg INSERT per batch`, got.raw, 'events/s')
    report(`${sessions} sessions concurrently: JSONL backend`, got.jsonl, 'events/s')
    report(`${sessions} sessions concurrently: package / raw`, got.package.map((p, i) => p / got.raw[i]), 'x')
    report(`${sessions} sessions concurrently: package / JSONL`, got.package.map((p, i) => p / got.jsonl[i]), 'x', sessions === 16 ? ['>=', 1.0] : undefined)
    await store.end()
  }

  // --- load of a 100k-event session, and its peak RSS (in a child process, per run)
  {
    const EVENTS = quick ? 50_000 : 100_000
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_load' })
    const header = JSON.stringify({ type: 'session', version: 0, id: 'big', createdAt: 1, delegationDepth: 0 })
    const eventLines = lines(0, EVENTS)
    await store.importRaw({ id: 'big', headerLine: header, eventLines })
    await store.end()
    const dataBytes = eventLines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
    const child = (mode) =>
      new Promise((resolve, reject) => {
        const p = spawn(process.execPath, [fileURLToPath(import.meta.url), '--load-child', url, mode], {
          stdio: ['ignore', 'pipe', 'inherit'],
        })
        let out = ''
        p.stdout.on('data', (d) => (out += d))
        p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`load child exited ${code}`))))
      })
    const got = { package: [], raw: [], rss: [] }
    for (let r = 0; r < RUNS; r++) {
      for (const k of rotate(['package', 'raw'], r)) {
        const m = await child(k)
        if (m.events !== EVENTS) throw new Error(`${k} loaded ${m.events} events`)
        got[k].push(m.eventsPerSecond)
        if (k === 'package') got.rss.push(m.peakRssAboveBaseline / dataBytes)
      }
    }
    report(`load ${EVENTS / 1000}k events: package`, got.package, 'events/s')
    report(`load ${EVENTS / 1000}k events: raw SELECT + JSON.parse`, got.raw, 'events/s')
    report(`load ${EVENTS / 1000}k events: package / raw`, got.package.map((p, i) => p / got.raw[i]), 'x', ['>=', 0.8])
    report(`load ${EVENTS / 1000}k events: peak RSS above baseline / data size`, got.rss, 'x', ['<=', 2.5])
  }

  // --- list of 10,000 sessions (headers only, one query)
  {
    const SESSIONS = quick ? 2_000 : 10_000
    const setup = createPostgresPersistence({ connectionString: url, schema: 'bench_list', poolSize: 8 })
    const one = lines(0, 4)
    const ids = Array.from({ length: SESSIONS }, (_, i) => `l${i}`)
    for (let i = 0; i < ids.length; i += 64) {
      await Promise.all(ids.slice(i, i + 64).map((id, j) =>
        setup.importRaw({ id, headerLine: JSON.stringify({ type: 'session', version: 0, id, createdAt: i + j, delegationDepth: 0 }), eventLines: one }),
      ))
    }
    await setup.end()
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_list' })
    await store.list() // migrations checked once, outside the timing
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const scans = async () => (await client.query(`SELECT coalesce(seq_scan,0) + coalesce(idx_scan,0) AS n FROM pg_stat_user_tables WHERE schemaname = 'bench_list' AND relname = 'events'`)).rows[0].n
    const got = []
    for (let r = 0; r < RUNS; r++) {
      const t = now()
      const listed = await store.list()
      got.push(now() - t)
      if (listed.length !== SESSIONS) throw new Error(`listed ${listed.length}`)
    }
    report(`list ${SESSIONS} sessions (one query, headers only)`, got, 'ms')
    console.log(`  events-table scans recorded by the server during the lists: ${await scans()} (cumulative, includes setup)`)
    await client.end()
    await store.end()
  }

  // --- sessions of any length (§15): a tail load and reads of a long session against a short one
  // holding the same tail, lists by last write against a full list, and watch latency
  {
    const LONG = quick ? 50_000 : 200_000
    const TAIL = 2_000 // ~0.8 MB of events from the compaction's firstKeptSeq on
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_any', poolSize: 4 })
    const header = (id) => JSON.stringify({ type: 'session', version: 0, id, createdAt: 1, delegationDepth: 0 })
    // A log whose last TAIL events follow a compaction that keeps them, and a request header
    // recorded again after it (as a host that compacts does); turns every 50 events before.
    const withMarkers = (n) => {
      const out = events(0, n)
      for (let seq = 0; seq < n - TAIL; seq += 50) out[seq] = { seq, type: 'turn/start', time: 1, data: { turn: seq / 50 } }
      for (let seq = 49; seq < n - TAIL; seq += 50) out[seq] = { seq, type: 'turn/end', time: 1, data: { turn: (seq - 49) / 50, reason: { kind: 'completed' } } }
      out[n - TAIL] = { seq: n - TAIL, type: 'history/compact', time: 1, data: { summary: 'everything before', firstKeptSeq: n - TAIL } }
      out[n - TAIL + 1] = { seq: n - TAIL + 1, type: 'request/header', time: 1, data: { header: { model: 'm' }, reason: 'resume' } }
      return out.map((e) => JSON.stringify(e))
    }
    await store.importRaw({ id: 'long', headerLine: header('long'), eventLines: withMarkers(LONG) })
    await store.importRaw({ id: 'short', headerLine: header('short'), eventLines: withMarkers(TAIL) })
    const got = { tailLong: [], fullShort: [], fullLong: [], lastLong: [], lastShort: [], midLong: [], midShort: [] }
    // Each figure of a run is the mean of `reps` calls: a read takes about a millisecond, where
    // one call's time is mostly the machine's noise.
    const time = async (k, fn, reps = 1) => {
      const t = now()
      for (let i = 0; i < reps; i++) await fn()
      got[k].push((now() - t) / reps)
    }
    const load = async (id, options) => {
      const loaded = await store.load(id, { closeOpenTurn: false, ...options })
      await store.close(id)
      return loaded
    }
    for (let r = 0; r < RUNS; r++) {
      const steps = [
        ['tailLong', () => load('long', { from: 'last-compaction' })],
        ['fullShort', () => load('short')],
        ['lastLong', () => store.read('long', { last: 100 })],
        ['lastShort', () => store.read('short', { last: 100 })],
        ['midLong', () => store.read('long', { fromSeq: LONG / 2, toSeq: LONG / 2 + 100 })],
        ['midShort', () => store.read('short', { fromSeq: TAIL / 2, toSeq: TAIL / 2 + 100 })],
      ]
      for (const [k, fn] of rotate(steps, r)) await time(k, fn, k.startsWith('last') || k.startsWith('mid') ? 20 : 3)
      if (r < 3) await time('fullLong', () => load('long'))
    }
    const tail = await load('long', { from: 'last-compaction' })
    if (tail.events.length !== TAIL) throw new Error(`the tail load read ${tail.events.length} events`)
    const per = (a, b) => got[a].map((x, i) => x / got[b][i])
    report(`tail load of ${LONG / 1000}k events (tail ${TAIL}): package`, got.tailLong, 'ms')
    report(`full load of the ${TAIL}-event log with the same tail`, got.fullShort, 'ms')
    report(`full load of the ${LONG / 1000}k-event log (3 runs)`, got.fullLong, 'ms')
    report(`tail load of ${LONG / 1000}k / full load of ${TAIL}`, per('tailLong', 'fullShort'), 'x', ['<=', 1.2])
    report(`read last 100: ${LONG / 1000}k / ${TAIL}-event log`, per('lastLong', 'lastShort'), 'x', ['<=', 1.5])
    report(`read 100 from the middle: ${LONG / 1000}k / ${TAIL}-event log`, per('midLong', 'midShort'), 'x', ['<=', 1.5])
    report(`read last 100 of ${LONG / 1000}k events`, got.lastLong, 'ms')

    // watch: from another store's append resolving to the event being yielded, against the floor
    // of any watch through notifications: a raw pg_notify from one connection heard by a LISTEN
    // on another, which then reads the new line by its primary key (as fs.watch + a read of the
    // appended bytes is the JSONL backend's floor).
    const writer = createPostgresPersistence({ connectionString: url, schema: 'bench_any', poolSize: 2 })
    await writer.create({ id: 'watched', createdAt: 1, delegationDepth: 0 })
    await writer.append('watched', events(0, 1))
    const stop = new AbortController()
    const iterator = store.watch('watched', { signal: stop.signal })[Symbol.asyncIterator]()
    await iterator.next()
    const listener = new pg.Client({ connectionString: url })
    const sender = new pg.Client({ connectionString: url })
    await Promise.all([listener.connect(), sender.connect()])
    await listener.query('LISTEN bench_raw')
    const watchMs = []
    const rawMs = []
    const APPENDS = quick ? 20 : 50
    for (let i = 1; i <= APPENDS; i++) {
      const next = iterator.next()
      await writer.append('watched', events(i, 1))
      const t = now()
      const { value } = await next
      watchMs.push(now() - t)
      if (value.seq !== i) throw new Error(`watch yielded seq ${value.seq}`)
      const heard = new Promise((resolve) => listener.once('notification', resolve))
      const t2 = now()
      await sender.query(`SELECT pg_notify('bench_raw', 'x')`)
      await heard
      await listener.query('SELECT line FROM bench_any.events WHERE session_id = $1 AND seq = $2', ['watched', i])
      rawMs.push(now() - t2)
    }
    stop.abort()
    await iterator.return?.()
    await Promise.all([listener.end(), sender.end(), writer.end()])
    report('watch: append resolved -> event yielded', watchMs, 'ms')
    report('watch: raw pg_notify -> LISTEN -> SELECT the line (floor)', rawMs, 'ms')
    report('watch latency / raw notify', watchMs.map((w, i) => w / rawMs[i]), 'x', ['<=', 2])
    await store.end()
  }

  // --- list by last write with a limit, against a full list (the 10,000 sessions above)
  {
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_list' })
    await store.list({ limit: 1 })
    const got = { limited: [], full: [] }
    for (let r = 0; r < RUNS; r++) {
      for (const k of rotate(['limited', 'full'], r)) {
        const t = now()
        const listed = await (k === 'limited' ? store.list({ orderBy: 'lastWrite', limit: 50 }) : store.list())
        got[k].push(now() - t)
        if (k === 'limited' && listed.length !== 50) throw new Error(`listed ${listed.length}`)
      }
    }
    report(`list by last write, limit 50, of ${quick ? 2 : 10}k sessions`, got.limited, 'ms')
    report('list by last write limit 50 / full list', got.limited.map((x, i) => x / got.full[i]), 'x', ['<=', 0.25])
    await store.end()
  }
  }
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  await server.stop()
  for (const d of dirs) cleanup(d)
}

/**
 * Makes the fresh server one in service: a server that has run a while reuses its WAL segments
 * after each checkpoint, while a fresh one creates and zero-fills a new 16 MB segment every
 * ~25k events (~20 ms here, with every commit waiting). ~1 GB of WAL and a checkpoint first,
 * so the segments the bench writes into already exist. The same for every PostgreSQL contender.
 */
async function serveWarm(url) {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`CREATE TABLE bench_warm AS SELECT g, repeat('x', 900) AS pad FROM generate_series(1, 1000000) g`)
    await client.query('DROP TABLE bench_warm')
    await client.query('CHECKPOINT')
  } finally {
    await client.end()
  }
}

/** One load measured in a fresh process (so its peak RSS is its own): prints {events, eventsPerSecond, peakRssAboveBaseline}. */
async function loadChild(url, mode) {
  let count = 0
  let ms = 0
  let baseline = 0
  if (mode === 'package') {
    const store = createPostgresPersistence({ connectionString: url, schema: 'bench_load' })
    await store.list() // connect and check the schema before the baseline
    global.gc?.()
    baseline = process.memoryUsage().rss
    const t = now()
    const loaded = await store.load('big', { closeOpenTurn: false })
    ms = now() - t
    count = loaded.events.length
    await store.end()
  } else {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query('SELECT 1')
    baseline = process.memoryUsage().rss
    const t = now()
    const { rows } = await client.query({ text: 'SELECT line FROM bench_load.events WHERE session_id = $1 ORDER BY seq', values: ['big'], rowMode: 'array' })
    const events = rows.map((r) => JSON.parse(r[0]))
    ms = now() - t
    count = events.length
    await client.end()
  }
  const peak = peakRssBytes()
  process.stdout.write(JSON.stringify({ events: count, eventsPerSecond: count / (ms / 1000), peakRssAboveBaseline: peak - baseline }))
}
