// §15.5: peak memory above baseline of one append, load, read and watch of a session holding one line
// of about 64 MiB, as a multiple of the line's size (the contract's bound: 4×), each in a fresh
// process, both format versions. Peak is the process's own high-water mark (VmHWM, reset to the
// current RSS through /proc/self/clear_refs just before the call, the event to append already
// built), so Linux only.
//   npm run build && node bench/probes/huge-line-memory.mjs [--postgres]   (SPJ_BENCH_DIST=<dir> for another build)
// --postgres: the same on the PostgreSQL backend, against a throwaway server it starts (Debian's
// postgresql-15) or SPJ_PG_URL. --two-byte: the text starts with one character outside Latin-1
// ('€'), so V8 holds every string of it at two bytes a character instead of one (the line's
// size in bytes hardly changes). The raw stream is what `copy` reads (its pages kept); the tail
// load (`from: 'last-compaction'`) is of a session whose huge line is the compaction in force.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const DIST = process.env.SPJ_BENCH_DIST ? `${pathToFileURL(resolve(process.env.SPJ_BENCH_DIST)).href}/` : new URL('../../dist/', import.meta.url).href
const LINE = 64 * 1024 * 1024 - 200 // the text; the line is a little longer, under the 64 MiB limit
const status = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024

if (process.argv[2] === 'child') {
  const [, , , op, root, version, url] = process.argv
  let p
  if (url) {
    // `root` names the schema
    const { createPostgresPersistence } = await import(`${DIST}postgres/index.js`)
    p = createPostgresPersistence({ connectionString: url, schema: root, formatVersion: Number(version), poolSize: 2 })
  } else {
    const { createJsonlPersistence } = await import(`${DIST}index.js`)
    p = createJsonlPersistence({ root, sync: 'none', formatVersion: Number(version) })
  }
  let event
  const id = op === 'append-first' ? 'f' : op === 'append-compact' ? 'c' : 's'
  if (op === 'append' || op === 'append-first' || op === 'append-compact') {
    // A flat string, as text read from a file or a parsed response is ('x'.repeat makes a rope).
    // Decoded from bytes: a flat string ('€' is 3 bytes: the same size).
    const text = process.env.SPJ_TWO_BYTE ? Buffer.concat([Buffer.from('€'), Buffer.alloc(LINE - 3, 'r')]).toString('utf8') : Buffer.alloc(LINE, 'r').toString('latin1')
    event = { seq: 0, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text }] } }
    await p.create({ id, createdAt: 1, delegationDepth: 0 })
    if (op === 'append') {
      await p.append(id, [{ seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } }])
      event.seq = 1
    }
    if (op === 'append-compact') {
      // A session whose huge line is the compaction in force (its summary, keeping from itself
      // on): a tail load reads it to find where to start, and loads it.
      await p.append(id, [{ seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } }, { seq: 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }])
      event = { seq: 2, type: 'history/compact', time: 1, data: { summary: text, firstKeptSeq: 2 } }
    }
  }
  globalThis.gc()
  writeFileSync('/proc/self/clear_refs', '5') // VmHWM := VmRSS
  const base = status('VmRSS')
  if (op.startsWith('append')) {
    await p.append(id, [event])
    if (op === 'append-compact') {
      event = undefined
      await p.append(id, [{ seq: 3, type: 'turn/start', time: 1, data: { turn: 2 } }, { seq: 4, type: 'turn/end', time: 1, data: { turn: 2, reason: { kind: 'completed' } } }])
    }
  } else if (op === 'load') globalThis.kept = await p.load('s')
  else if (op === 'tail-load') globalThis.kept = await p.load('c', { from: 'last-compaction' })
  else if (op === 'raw-stream') {
    // What `copy` reads: the raw stream of the session, its pages kept.
    const stream = await p.openRawStream('s')
    globalThis.kept = []
    for await (const page of stream.eventPages) globalThis.kept.push(page)
  }
  else if (op === 'watch') {
    // A watcher from the huge event on, until it has it (the next line is the closer a load appended).
    const stop = new AbortController()
    for await (const e of p.watch('s', { fromSeq: 1, signal: stop.signal })) {
      globalThis.kept = e
      stop.abort()
    }
  } else globalThis.kept = await p.read('s', { fromSeq: 1, toSeq: 2 }) // the huge event, not the closer a load appended
  const peak = status('VmHWM')
  await p.closeAll()
  await p.end?.()
  process.stdout.write(JSON.stringify({ ratio: (peak - base) / LINE }))
  process.exit(0)
}

const postgres = process.argv.includes('--postgres')
const twoByte = process.argv.includes('--two-byte')
let server
let url = process.env.SPJ_PG_URL
if (postgres && !url) {
  const { startThrowawayPostgres } = await import(`${DIST}torture/postgres-server.js`)
  server = await startThrowawayPostgres()
  url = server.url
}
const run = (op, root, version) => {
  const env = twoByte ? { ...process.env, SPJ_TWO_BYTE: '1' } : process.env
  const r = spawnSync(process.execPath, ['--expose-gc', process.argv[1], 'child', op, root, String(version), ...(postgres ? [url] : [])], { encoding: 'utf8', env })
  if (r.status !== 0) throw new Error(`${op} failed: ${r.stderr}`)
  return JSON.parse(r.stdout).ratio
}
console.log(`one line of ~64 MiB${postgres ? ' on PostgreSQL' : ''}${twoByte ? ', text outside Latin-1 (two bytes a character in V8)' : ''}: peak memory above baseline / line size (bound: 4×), fresh process each`)
try {
  for (const version of [0, 1]) {
    const root = postgres ? `huge_${process.pid}_v${version}` : mkdtempSync(join(tmpdir(), 'spj-huge-'))
    try {
      const first = run('append-first', root, version) // the log's first append (materialization)
      const later = run('append', root, version)
      const read = run('read', root, version)
      const load = run('load', root, version)
      const watch = run('watch', root, version)
      const raw = run('raw-stream', root, version)
      run('append-compact', root, version)
      const tail = run('tail-load', root, version)
      const f = (x) => `${x.toFixed(2)}×${x <= 4 ? '' : ' (over 4×)'}`
      console.log(
        `  version ${version}: first append ${f(first)}, later append ${f(later)}, load ${f(load)}, read of it ${f(read)}, watch of it ${f(watch)}, ` +
          `raw stream of it (copy) ${f(raw)}, tail load of it as the compaction in force ${f(tail)}`,
      )
    } finally {
      if (!postgres) rmSync(root, { recursive: true, force: true })
    }
  }
} finally {
  // Stopped whatever happened: a failed call must not leave the throwaway server running.
  await server?.stop()
}
