// The PostgreSQL phase of `npm run torture`: writer processes append to sessions on a real
// server and are SIGKILLed at random moments; the next writer resumes at once. Every batch a
// writer acknowledged must be stored, byte for byte, exactly once, and every log contiguous.
// Run on its own: `node dist/torture/postgres-kills.js [--kills N] [--url postgres://…]`.
import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { startThrowawayPostgres } from './postgres-server.js'
import { seededRandom } from './random.js'
import { workerEvents } from './postgres-worker.js'
import { sealLine } from '../session/line-codec.js'

export interface PostgresKillReport {
  kills: number
  ackedEvents: number
  failures: string[]
}

// Compiled, the worker sits beside this file; run from the sources (vitest), it is in dist/.
const HERE = fileURLToPath(import.meta.url)
const WORKER = HERE.endsWith('.ts')
  ? fileURLToPath(new URL('../../dist/torture/postgres-worker.js', import.meta.url))
  : fileURLToPath(new URL('./postgres-worker.js', import.meta.url))


interface Reply {
  ok: boolean
  code?: string
  message?: string
}

interface Round {
  child: ChildProcess
  exited: Promise<void>
  replies: Map<number, (msg: Reply) => void>
  send(cmd: object): Promise<Reply>
}

function spawnWriter(onAck: (id: string, seq: number, n: number) => void, onError: (line: string) => void): Round {
  const child = spawn(process.execPath, [WORKER], { stdio: ['pipe', 'pipe', 'inherit'] })
  const replies = new Map<number, (msg: Reply) => void>()
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const msg = JSON.parse(line) as { id?: number; ack?: string; seq?: number; n?: number; error?: string; ok: boolean }
    if (msg.ack !== undefined) onAck(msg.ack, msg.seq!, msg.n!)
    else if (msg.error !== undefined) onError(line)
    else if (msg.id !== undefined) replies.get(msg.id)?.(msg)
  })
  let next = 0
  return {
    child,
    exited,
    replies,
    send(cmd) {
      const id = next++
      // A writer that died answers every pending command with EXITED (never an unhandled rejection).
      return new Promise((resolve) => {
        replies.set(id, resolve)
        void exited.then(() => resolve({ ok: false, code: 'EXITED', message: 'the writer process exited' }))
        child.stdin!.on('error', () => {})
        child.stdin!.write(`${JSON.stringify({ id, ...cmd })}\n`)
      })
    },
  }
}

/** Asks the server until no connection of `host` is left: its advisory locks are gone then. */
async function backendsGone(client: pg.Client, host: string): Promise<void> {
  for (;;) {
    const { rows } = await client.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [`session-persistence-jsonl ${host}`])
    if (rows.length === 0) return
  }
}

/**
 * `kills` rounds: a writer process loads every session of this lane (or creates it), streams
 * batches to all of them, and is SIGKILLed after a random number of acknowledgements.
 */
export async function runPostgresKillTorture(options: {
  url: string
  schema: string
  kills: number
  seed: number
  sessions?: number
}): Promise<PostgresKillReport> {
  const { url, schema, kills, seed } = options
  const random = seededRandom(seed)
  const ids = Array.from({ length: options.sessions ?? 3 }, (_, i) => `lane${seed}-s${i}`)
  const acked = new Map<string, number>(ids.map((id) => [id, 0]))
  const failures: string[] = []
  const client = new pg.Client({ connectionString: url })
  client.on('error', () => {}) // a failed query reports it
  await client.connect()
  try {
    for (let round = 0; round < kills && failures.length === 0; round++) {
      const host = `torture-${seed}-${round}`
      let acks = 0
      const target = 1 + Math.floor(random() * 12)
      let reached!: () => void
      const enough = new Promise<void>((resolve) => (reached = resolve))
      const w = spawnWriter(
        (id, seq, n) => {
          const before = acked.get(id) ?? 0
          // A batch stored but not yet acknowledged when its writer died is resumed after, so >=.
          if (seq < before) failures.push(`round ${round}: ${id} acknowledged seq ${seq} below the ${before} acknowledged before`)
          acked.set(id, seq + n)
          if (++acks >= target) reached()
        },
        (line) => {
          failures.push(`round ${round}: writer reported ${line}`)
          reached() // the round ends on its first failure: a writer that only fails would never reach its target
        },
      )
      const opened = await w.send({ op: 'open', url, schema, host })
      if (!opened.ok) failures.push(`round ${round}: open failed: ${opened.message}`)
      for (const id of ids) {
        // A session whose first batch never committed has no row yet: create it then.
        let r = await w.send({ op: 'load', session: id })
        if (!r.ok && r.code === 'E_NOT_FOUND' && acked.get(id) === 0) r = await w.send({ op: 'create', session: id })
        if (!r.ok) failures.push(`round ${round}: resume ${id}: ${r.code} ${r.message}`)
      }
      if (failures.length > 0) {
        w.child.kill('SIGKILL')
        break
      }
      const streaming = await w.send({ op: 'stream', sessions: ids, batch: 1 + Math.floor(random() * 20), tag: 'torture' })
      if (!streaming.ok) {
        failures.push(`round ${round}: stream: ${streaming.code} ${streaming.message}`)
        break
      }
      const died = await Promise.race([enough.then(() => false), w.exited.then(() => true)])
      if (died) {
        failures.push(`round ${round}: the writer died before it was killed`)
        break
      }
      // Sometimes at once, sometimes while more batches are in flight.
      if (random() < 0.5) await new Promise((resolve) => setImmediate(resolve))
      w.child.kill('SIGKILL')
      await w.exited
      await backendsGone(client, host)
    }
    for (const id of ids) {
      const { rows } = await client.query<{ seq: string; line: string }>(
        `SELECT seq, line FROM "${schema}".events WHERE session_id = $1 ORDER BY seq`,
        [id],
      )
      const want = acked.get(id)!
      if (rows.length < want) failures.push(`${id}: ${want} events acknowledged, ${rows.length} stored`)
      const expected = workerEvents(0, rows.length, 'torture').map((e) => sealLine(JSON.stringify(e), 1)) // the workers write version 1, the default
      rows.forEach((r, i) => {
        if (Number(r.seq) !== i) failures.push(`${id}: seq ${r.seq} at position ${i}`)
        else if (r.line !== expected[i]) failures.push(`${id}: line ${i} differs from what was appended`)
      })
    }
  } finally {
    await client.end()
  }
  return { kills, ackedEvents: [...acked.values()].reduce((a, b) => a + b, 0), failures: failures.slice(0, 20) }
}

/**
 * The phase as `npm run torture` runs it: its own throwaway server unless `url` is given,
 * `lanes` lanes in parallel (each its own sessions), `kills` kills in total.
 */
export async function runPostgresTorturePhase(options: { kills: number; url?: string; lanes?: number }): Promise<PostgresKillReport> {
  const server = options.url ? undefined : await startThrowawayPostgres()
  const url = options.url ?? server!.url
  const lanes = options.lanes ?? 2
  const schema = `torture_${process.pid}_${Date.now()}`
  try {
    const reports = await Promise.all(
      Array.from({ length: lanes }, (_, i) =>
        runPostgresKillTorture({ url, schema, kills: Math.ceil(options.kills / lanes), seed: 101 + i }),
      ),
    )
    return {
      kills: reports.reduce((a, r) => a + r.kills, 0),
      ackedEvents: reports.reduce((a, r) => a + r.ackedEvents, 0),
      failures: reports.flatMap((r) => r.failures),
    }
  } finally {
    if (options.url) {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => client.end())
    }
    await server?.stop()
  }
}

if (process.argv[1] && HERE === process.argv[1]) {
  const { values } = parseArgs({ options: { kills: { type: 'string', default: '2000' }, url: { type: 'string' }, quick: { type: 'boolean' } } })
  const kills = values.quick ? 100 : Number(values.kills)
  const t = Date.now()
  const r = await runPostgresTorturePhase({ kills, ...(values.url ? { url: values.url } : {}) })
  console.log(
    `PostgreSQL SIGKILL: ${r.kills} kills, ${r.ackedEvents} acknowledged events checked, ${r.failures.length} failures (${((Date.now() - t) / 1000).toFixed(0)} s)`,
  )
  for (const f of r.failures.slice(0, 10)) console.log(`  ${f}`)
  process.exitCode = r.failures.length > 0 ? 1 : 0
}
