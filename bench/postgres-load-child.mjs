// One load measured in a fresh process (so its peak RSS is its own): prints
// {events, eventsPerSecond, peakRssAboveBaseline}. Used by bench/postgres.mjs.
import pg from 'pg'
import { createPostgresPersistence } from '../dist/postgres/index.js'

const [url, mode] = process.argv.slice(2)
const now = () => Number(process.hrtime.bigint()) / 1e6
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
const peak = process.resourceUsage().maxRSS * 1024
process.stdout.write(JSON.stringify({ events: count, eventsPerSecond: count / (ms / 1000), peakRssAboveBaseline: peak - baseline }))
