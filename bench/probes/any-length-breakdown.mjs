// Where the time of the §15 operations goes, step by step, on the fixtures of
// bench/scenarios/any-length.mjs (run that with --keep first). Not part of any run; after `npm run build`:
//
//   node --expose-gc bench/probes/any-length-breakdown.mjs [resume,read,list,watch]
//
// Uses the build's internals (dist/jsonl/…), so it follows their names; SPJ_BENCH_DIST as in
// any-length.mjs. Medians of interleaved iterations, warm process, warm page cache.
import { close as closeCb, fstat as fstatCb, open as openCb, read as readCb, readdir as readdirCb, readFileSync, rmSync, stat as statCb } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import PQueue from 'p-queue'
import { median, now } from '../lib.mjs'

const DIST = process.env.SPJ_BENCH_DIST ? `${pathToFileURL(resolve(process.env.SPJ_BENCH_DIST)).href}/` : new URL('../../dist/', import.meta.url).href
const { createJsonlPersistence, SessionHeaderSchema } = await import(`${DIST}index.js`)
const { createNodeFileSystem } = await import(`${DIST}jsonl/fs/node-file-system.js`)
const { findLogTail } = await import(`${DIST}jsonl/log-tail.js`)
const { readHeaderLine, lastEventLine } = await import(`${DIST}jsonl/read-session.js`)
const { bisectSeq } = await import(`${DIST}jsonl/seq-search.js`)
const { scanLog } = await import(`${DIST}jsonl/scan-log.js`)
const { readHeader } = await import(`${DIST}jsonl/list-sessions.js`)

const WORK = join(process.env.BENCH_DIR ?? fileURLToPath(new URL('../.work', import.meta.url)), 'any-length')
const want = (process.argv[2] ?? 'resume,read,list,watch').split(',')
const fsys = createNodeFileSystem()
const ITER = 40

/** A handle whose reads are counted. */
function counted(h) {
  const c = { reads: 0, bytes: 0 }
  return Object.assign(c, {
    h: { ...Object.fromEntries(['write', 'sync', 'datasync', 'truncate', 'stat', 'chmod', 'close'].map((k) => [k, (...a) => h[k](...a)])),
      read: async (...a) => {
        c.reads++
        const n = await h.read(...a)
        c.bytes += n
        return n
      } },
  })
}

/** Runs each named step ITER times, interleaved, and prints the median ms and the reads of one. */
async function steps(title, list) {
  console.log(title)
  const times = Object.fromEntries(list.map(([n]) => [n, []]))
  const io = {}
  for (let i = 0; i < ITER + 5; i++) {
    for (const [name, fn] of list) {
      const t = now()
      const r = await fn()
      if (i >= 5) times[name].push(now() - t)
      if (r && typeof r === 'object' && 'reads' in r) io[name] = r
    }
  }
  for (const [name] of list) {
    const extra = io[name] ? `  (${io[name].reads} reads, ${(io[name].bytes / 1024).toFixed(0)} KiB${io[name].note ? `; ${io[name].note}` : ''})` : ''
    console.log(`  ${name.padEnd(66)} ${median(times[name]).toFixed(3).padStart(8)} ms${extra}`)
  }
}

const m = JSON.parse(readFileSync(join(WORK, 'resume', 'manifest.json'), 'utf8'))
const withHandle = async (path, fn) => {
  const raw = await fsys.open(path, 'r')
  const c = counted(raw)
  try {
    const out = await fn(c.h)
    return { reads: c.reads, bytes: c.bytes, ...(typeof out === 'string' ? { note: out } : {}) }
  } finally {
    await raw.close()
  }
}

async function headerBytesOf(path, id) {
  const h = await fsys.open(path, 'r')
  try {
    return (await readHeaderLine(h, path, id)).headerBytes
  } finally {
    await h.close()
  }
}

if (want.includes('resume')) {
  const big = m.big
  const small = m.small
  const hb = await headerBytesOf(big.path, 'big')
  await steps(`resume: the steps of load(id, { from: 'last-compaction' }) of the 1 GiB log, against the full load of the 1 MiB log`, [
    ['package load, 1 GiB, from last-compaction (with lock, then close)', async () => {
      const p = createJsonlPersistence({ root: big.root })
      await p.load('big', { from: 'last-compaction' })
      await p.closeAll()
    }],
    ['package load, 1 MiB, from start (with lock, then close)', async () => {
      const p = createJsonlPersistence({ root: small.root })
      await p.load('small')
      await p.closeAll()
    }],
    ['  1 GiB: readHeaderLine', () => withHandle(big.path, (h) => readHeaderLine(h, big.path, 'big'))],
    ['  1 GiB: findLogTail (backward marker scan + bisection when needed)', () => withHandle(big.path, async (h) => {
      const t = await findLogTail(h, hb, big.size)
      return `firstSeq ${t.firstSeq}, forward scan starts at seq ${t.start.seq}${t.start.seq === t.firstSeq ? ' (exact)' : ` (${t.firstSeq - t.start.seq} events early, via bisection)`}`
    })],
    ['  1 GiB: scanLog of the tail from firstSeq', () => withHandle(big.path, async (h) => {
      const { header } = await readHeaderLine(h, big.path, 'big')
      await scanLog(h, { path: big.path, sessionId: 'big', start: { offset: big.tailOffset, seq: big.k, header, headerBytes: hb } })
    })],
    ['  1 MiB: scanLog of the whole log', () => withHandle(small.path, (h) => scanLog(h, { path: small.path, sessionId: 'small' }))],
  ])
}

if (want.includes('read')) {
  for (const [label, f, id] of [['1 GiB', m.big, 'big'], ['1 MiB', m.small, 'small']]) {
    const from = Math.floor(f.length / 2)
    const hb = await headerBytesOf(f.path, id)
    let lastEnd
    await withHandle(f.path, async (h) => (lastEnd = (await lastEventLine(h, hb, f.size)).end))
    let start
    await withHandle(f.path, async (h) => (start = await bisectSeq(h, { offset: hb, seq: 0 }, lastEnd, from)))
    await steps(`read: a 100-event page from the middle of the ${label} log (seq ${from}), step by step`, [
      [`package read({ fromSeq, toSeq }) (${label})`, () => createJsonlPersistence({ root: f.root }).read(id, { fromSeq: from, toSeq: from + 100 })],
      [`package read({ last: 100 }) (${label})`, () => createJsonlPersistence({ root: f.root }).read(id, { last: 100 })],
      ['  readHeaderLine', () => withHandle(f.path, (h) => readHeaderLine(h, f.path, id))],
      ['  lastEventLine (backward, 64 KiB blocks)', () => withHandle(f.path, (h) => lastEventLine(h, hb, f.size))],
      ['  bisectSeq to the page', () => withHandle(f.path, (h) => bisectSeq(h, { offset: hb, seq: 0 }, lastEnd, from))],
      ['  bisectSeq to length - 100 (what { last: 100 } does)', () => withHandle(f.path, (h) => bisectSeq(h, { offset: hb, seq: 0 }, lastEnd, f.length - 100))],
      ['  scanLog from the bisection point until seq + 100', () => withHandle(f.path, async (h) => {
        const { header } = await readHeaderLine(h, f.path, id)
        await scanLog(h, { path: f.path, sessionId: id, to: f.size, start: { ...start, header, headerBytes: hb }, untilSeq: from + 100 })
      })],
      ['  for scale: one 64 KiB read at the page and JSON.parse of its 100 lines', () => withHandle(f.path, async (h) => {
        const buf = Buffer.allocUnsafe(64 * 1024)
        const n = await h.read(buf, 0, buf.length, start.offset)
        const lines = buf.toString('utf8', 0, n).split('\n')
        let k = 0
        for (const line of lines) {
          if (k === 140) break
          try {
            JSON.parse(line)
            k++
          } catch {}
        }
      })],
    ])
  }
}

if (want.includes('list')) {
  const root = join(WORK, 'list')
  const cb = (start) => new Promise((ok, fail) => start((err, v) => (err ? fail(err) : ok(v))))
  const files = []
  for (const b of (await cb((k) => readdirCb(root, { withFileTypes: true }, k))).filter((d) => d.isDirectory() && !d.name.startsWith('.'))) {
    for (const name of await cb((k) => readdirCb(join(root, b.name), k))) files.push([join(root, b.name, name), name.slice(0, -'.jsonl'.length)])
  }
  const pool = async (fn) => {
    let next = 0
    await Promise.all(Array.from({ length: 32 }, async () => {
      const buf = Buffer.allocUnsafe(4096)
      while (next < files.length) await fn(files[next++], buf)
    }))
  }
  const rawOpenRead = async ([path], buf, withStat) => {
    const fd = await cb((k) => openCb(path, 'r', k))
    const n = await cb((k) => readCb(fd, buf, 0, 4096, 0, k))
    if (withStat) await cb((k) => fstatCb(fd, k))
    await cb((k) => closeCb(fd, k))
    return n
  }
  const ctx = { fs: fsys, root }
  const list = [
    ['package list() (PQueue of 32, readHeader per log)', () => createJsonlPersistence({ root }).list()],
    ["package list({ orderBy: 'lastWrite', limit: 50 })", () => createJsonlPersistence({ root }).list({ orderBy: 'lastWrite', limit: 50 })],
    ['raw: readdirs, then open/read 4 KiB/close, 32 workers', () => pool((f, buf) => rawOpenRead(f, buf, false))],
    ['raw: the same + fstat (what readHeader does per log)', () => pool((f, buf) => rawOpenRead(f, buf, true))],
    ['raw: the same + JSON.parse + SessionHeaderSchema.safeParse of line 1', () => pool(async (f, buf) => {
      const n = await rawOpenRead(f, buf, true)
      const line = buf.toString('utf8', 0, buf.indexOf(10) === -1 ? n : buf.indexOf(10))
      if (!SessionHeaderSchema.safeParse(JSON.parse(line)).success) throw new Error('bad header')
    })],
    ["the package's readHeader (seam) per log, 32 workers, no PQueue", () => pool(([path, id]) => readHeader(ctx, path, id))],
    ["the package's readHeader per log through a PQueue of 32 (what list() does)", async () => {
      const q = new PQueue({ concurrency: 32 })
      await q.addAll(files.map(([path, id]) => () => readHeader(ctx, path, id)))
    }],
    ['raw: stat of every log, 32 workers', () => pool(([path]) => cb((k) => statCb(path, k)))],
    ["the seam's stat of every log through a PQueue of 32 (the picker's first pass)", async () => {
      const q = new PQueue({ concurrency: 32 })
      await q.addAll(files.map(([path]) => () => fsys.stat(path)))
    }],
  ]
  console.log(`list: ${files.length} logs, each step 5 times (after one untimed pass), interleaved`)
  const times = Object.fromEntries(list.map(([n]) => [n, []]))
  for (const [, fn] of list) await fn()
  for (let i = 0; i < 5; i++) {
    for (const [name, fn] of list) {
      globalThis.gc?.()
      const t = now()
      await fn()
      times[name].push(now() - t)
    }
  }
  for (const [name] of list) console.log(`  ${name.padEnd(78)} ${median(times[name]).toFixed(0).padStart(6)} ms  (${((median(times[name]) * 1000) / files.length).toFixed(1)} µs per log)`)
}

if (want.includes('watch')) {
  // The package's watcher in this process over a counting seam, a writer instance appending one
  // event every 10 ms: file-system calls per yielded event.
  const root = join(WORK, 'watch-probe')
  rmSync(root, { recursive: true, force: true })
  const c = { stat: 0, open: 0, read: 0, fstat: 0, close: 0, bytes: 0 }
  const base = fsys
  const seam = Object.create(base)
  seam.stat = (p) => (c.stat++, base.stat(p))
  seam.open = async (p, fl, mo) => {
    c.open++
    const h = await base.open(p, fl, mo)
    return { ...Object.fromEntries(['write', 'sync', 'datasync', 'truncate', 'chmod'].map((k) => [k, (...a) => h[k](...a)])),
      read: async (...a) => {
        c.read++
        const n = await h.read(...a)
        c.bytes += n
        return n
      },
      stat: () => (c.fstat++, h.stat()),
      close: () => (c.close++, h.close()) }
  }
  const w = createJsonlPersistence({ root, sync: 'none' })
  const ev = (seq) => ({ seq, type: 'assistant/chunk', time: seq, data: { turn: 1, step: 0, chunk: { type: 'text-delta', text: 'x'.repeat(300) } } })
  await w.create({ id: 'w', createdAt: 1, delegationDepth: 0 })
  await w.append('w', [ev(0)])
  const stop = new AbortController()
  const watcher = createJsonlPersistence({ root, fs: seam })
  let seen = 0
  const done = (async () => {
    for await (const e of watcher.watch('w', { fromSeq: 0, signal: stop.signal })) seen = e.seq + 1
  })()
  while (seen < 1) await new Promise((r) => setTimeout(r, 5))
  for (const k of Object.keys(c)) c[k] = 0
  const N = 100
  for (let i = 1; i <= N; i++) {
    await w.append('w', [ev(i)])
    await new Promise((r) => setTimeout(r, 10))
  }
  while (seen < N + 1) await new Promise((r) => setTimeout(r, 5))
  stop.abort()
  await done.catch(() => {})
  await w.closeAll()
  rmSync(root, { recursive: true, force: true })
  console.log(`watch: file-system calls of the package's watcher per appended event (${N} events, one every 10 ms)`)
  console.log(`  ${Object.entries(c).filter(([k]) => k !== 'bytes').map(([k, v]) => `${k} ${(v / N).toFixed(2)}`).join(', ')}; ${(c.bytes / N).toFixed(0)} bytes read`)
}
