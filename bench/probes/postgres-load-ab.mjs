// A load of 100,000 ordinary events on PostgreSQL, two builds side by side: each pair is a fresh
// process per build running `inspect` of the same stored session (one untimed `inspect` first:
// connection and plan), the order alternating. Not part of any run; builds made with
// `npx tsc -p tsconfig.json --outDir <dir>` of each tree:
//
//   node bench/probes/postgres-load-ab.mjs <build A> <build B> [--pairs N]      (default 9)
//
// Prints each build's median time and the median (min–max) of the pairs' B/A ratios. It starts a
// throwaway PostgreSQL (Debian's postgresql-15) from build A, or uses SPJ_PG_URL.
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import pg from 'pg'
import { median } from '../lib.mjs'

const EVENTS = 100_000
const SCHEMA = `load_ab_${process.pid}`
const build = (dir, file) => pathToFileURL(resolve(dir, file)).href

if (process.argv[2] === 'child') {
  const [, , , dir, url, schema] = process.argv
  const { createPostgresPersistence } = await import(build(dir, 'postgres/index.js'))
  const store = createPostgresPersistence({ connectionString: url, schema })
  await store.inspect('big')
  const t = performance.now()
  const { events } = await store.inspect('big')
  const ms = performance.now() - t
  await store.end()
  process.stdout.write(JSON.stringify({ ms, events: events.length }))
  process.exit(0)
}

const [a, b] = process.argv.slice(2).filter((x) => !x.startsWith('--'))
if (!a || !b) throw new Error('usage: postgres-load-ab.mjs <build A> <build B> [--pairs N]')
const pairsArg = process.argv.find((x) => x.startsWith('--pairs'))
const PAIRS = Number(pairsArg?.split('=')[1] ?? process.argv[process.argv.indexOf('--pairs') + 1]) || 9
let server
let url = process.env.SPJ_PG_URL
if (!url) {
  const { startThrowawayPostgres } = await import(build(a, 'torture/postgres-server.js'))
  server = await startThrowawayPostgres()
  url = server.url
}
try {
  const { createPostgresPersistence } = await import(build(a, 'postgres/index.js'))
  const store = createPostgresPersistence({ connectionString: url, schema: SCHEMA })
  const headerLine = JSON.stringify({ type: 'session', version: 0, id: 'big', createdAt: 1, delegationDepth: 0 })
  const eventLines = []
  for (let i = 0; i < EVENTS; i++) {
    eventLines.push(JSON.stringify({ seq: i, type: 'assistant/message', time: 1 + i, data: { turn: 1, step: 0, content: [{ type: 'text', text: 'x'.repeat(300) }] } }))
  }
  await store.importRaw({ id: 'big', headerLine, eventLines })
  const child = (dir) =>
    new Promise((res, rej) => {
      const p = spawn(process.execPath, [fileURLToPath(import.meta.url), 'child', dir, url, SCHEMA], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      p.stdout.on('data', (d) => (out += d))
      p.on('exit', (code) => (code === 0 ? res(JSON.parse(out)) : rej(new Error(`child of ${dir} exited ${code}`))))
    })
  const got = { a: [], b: [] }
  for (let i = 0; i < PAIRS; i++) {
    for (const k of i % 2 ? ['a', 'b'] : ['b', 'a']) {
      const r = await child(k === 'a' ? a : b)
      if (r.events !== EVENTS) throw new Error(`build ${k} loaded ${r.events} events`)
      got[k].push(r.ms)
    }
  }
  const ratios = got.b.map((ms, i) => ms / got.a[i])
  console.log(`inspect of ${EVENTS.toLocaleString('en')} events, ${PAIRS} pairs: A ${median(got.a).toFixed(1)} ms, B ${median(got.b).toFixed(1)} ms; B/A ${median(ratios).toFixed(3)}× (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`)
  await store.end()
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  await c.query(`DROP SCHEMA "${SCHEMA}" CASCADE`)
  await c.end()
} finally {
  await server?.stop()
}
