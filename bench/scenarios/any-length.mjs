// Sessions of any length (docs/contract.md §15, issue 19): resume from the last compaction,
// read a page, watch a live log, pick among 100,000 sessions, each as a ratio against a baseline
// measured in the same run, median of >= 5 runs (7 by default), targets printed beside the figures.
//
//   npm run build && node bench/scenarios/any-length.mjs [--runs N] [--only resume,read,watch,list,list-cold] [--keep]
//
// `list-cold` (only when named: it needs root and empties the page, dentry and inode caches of the
// whole machine before each timed call) measures the listing as a picker opened after a reboot does.
//
// Fixtures (a log of 1 GiB, one of ~1 MiB holding the same tail, 100,000 small logs) are written
// directly, lines as the package writes them, under bench/.work/any-length/ (git-ignored; BENCH_DIR
// moves it), reused by later runs while they match, and deleted at the end unless --keep is given.
// SPJ_BENCH_DIST=<dir> measures a build other than dist/ (e.g. one compiled into bench/.work/dist).
// Writes bench/results-any-length.json. Child processes (one per memory figure, the watchers, the
// idle probes) are this file again, started with --child.
import { execFileSync, fork, spawnSync } from 'node:child_process'
import {
  close as closeCb,
  closeSync,
  existsSync,
  fstatSync,
  fsyncSync,
  mkdirSync,
  open as openCb,
  openSync,
  read as readCb,
  readdir as readdirCb,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  watch,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { interleave, median, now, peakRssBytes, stats } from '../lib.mjs'

const SELF = fileURLToPath(import.meta.url)
const DIST = process.env.SPJ_BENCH_DIST ? `${pathToFileURL(resolve(process.env.SPJ_BENCH_DIST)).href}/` : new URL('../../dist/', import.meta.url).href
const { createJsonlPersistence, bucketName, toModelHistory } = await import(`${DIST}index.js`)
const { headerLine } = await import(`${DIST}session/meta.js`)
// Format version 1 (§16) seals every line with a CRC-32; a build without it writes version 0.
// The fixtures are written in the build's default version (SPJ_ANY_LENGTH_FORMAT=0 for version 0).
const codec = await import(`${DIST}session/line-codec.js`).catch(() => undefined)
const FORMAT = codec ? Number(process.env.SPJ_ANY_LENGTH_FORMAT ?? codec.DEFAULT_FORMAT_VERSION) : 0
/** One line as the package writes it, with its `\n`. */
const line = (value) => `${codec ? codec.sealLine(JSON.stringify(value), FORMAT) : JSON.stringify(value)}\n`
const header = (m) => (codec ? headerLine(m, FORMAT) : headerLine(m))
const { createNodeFileSystem } = await import(`${DIST}jsonl/fs/node-file-system.js`)
// How many threads the listing reads headers on (a build without it: one): the raw baseline is
// given as many, so that the ratio compares the same strategy, not a worse one.
const { peekWorkerCount } = await import(`${DIST}jsonl/fs/peek-files.js`).catch(() => ({ peekWorkerCount: () => 1 }))

const WORK = join(process.env.BENCH_DIR ?? fileURLToPath(new URL('../.work', import.meta.url)), 'any-length')
const GiB = 2 ** 30
const MiB = 2 ** 20
// Smaller fixtures for a smoke test of the script itself (the figures then mean nothing):
// SPJ_ANY_LENGTH_BIG_MIB=64 SPJ_ANY_LENGTH_SESSIONS=2000.
const BIG_BYTES = Number(process.env.SPJ_ANY_LENGTH_BIG_MIB ?? 1024) * MiB
const TAIL_BYTES = MiB
const LIST_SESSIONS = Number(process.env.SPJ_ANY_LENGTH_SESSIONS ?? 100_000)
const LIST_BUCKETS = 20
const FIXTURE_VERSION = 2
const LIST_FIXTURE_VERSION = 3

// ---------------------------------------------------------------------------------------------
// Events as a coding agent writes them: ~7 KB turns of 20 events (a user message, a step of 12
// streamed ~400-byte chunks, the assistant message with one tool call, the call, its result).

const T0 = 1_764_489_600_000
const TEXT = 'The quick brown fox jumps over the lazy dog while the agent streams its answer. '.repeat(5).slice(0, 300)
const REQUEST_HEADER = {
  model: 'model-x',
  system: TEXT,
  tools: [{ name: 'read_file', description: 'Reads a file of the project.', parameters: { type: 'object', properties: { path: { type: 'string' } } } }],
}
const meta = (id, extra = {}) => ({ id, createdAt: T0, delegationDepth: 0, ...extra })

function turnBody(turn) {
  const callId = `call_${turn}`
  const args = { path: `src/module-${turn % 97}.ts` }
  const out = [
    ['turn/start', { turn }],
    ['user/message', { content: `Step ${turn}: carry on with the refactoring and run the tests again.` }],
    ['step/start', { turn, step: 0 }],
  ]
  for (let k = 0; k < 12; k++) out.push(['assistant/chunk', { turn, step: 0, chunk: { type: 'text-delta', text: TEXT } }])
  out.push(['assistant/message', { turn, step: 0, content: [{ type: 'text', text: TEXT }, { type: 'tool-call', callId, name: 'read_file', arguments: args }] }])
  out.push(['tool/call', { turn, step: 0, callId, name: 'read_file', arguments: args }])
  out.push(['tool/result', { turn, step: 0, callId, content: [{ type: 'text', text: TEXT }] }])
  out.push(['step/end', { turn, step: 0 }])
  out.push(['turn/end', { turn, reason: { kind: 'completed' } }])
  return out
}

/** Lines written in large writes; every line is ASCII, so its length is its byte count. */
class LineWriter {
  constructor(path) {
    this.fd = openSync(path, 'w', 0o600)
    this.pending = []
    this.pendingBytes = 0
    this.offset = 0
  }
  raw(text) {
    const at = this.offset
    this.pending.push(text)
    this.pendingBytes += text.length
    this.offset += text.length
    if (this.pendingBytes >= 8 * MiB) this.flush()
    return at
  }
  flush() {
    if (this.pending.length > 0) writeSync(this.fd, this.pending.join(''))
    this.pending = []
    this.pendingBytes = 0
  }
  end() {
    this.flush()
    fsyncSync(this.fd) // so that no timed sync pays for the fixture's dirty pages
    closeSync(this.fd)
  }
}

/**
 * The 1 GiB log: a request header, turns up to ~1 GiB - 1 MiB, then the turns a compaction keeps
 * (from `k`), the `history/compact {summary, firstKeptSeq: k}` half-way through the last MiB, a
 * `request/header` recorded again after it (reason 'resume'), and turns to ~1 GiB, all closed.
 * The small log holds the same tail (seqs k… renumbered from 0) after its header.
 */
function writeResumeFixtures(dir) {
  const bigPath = join(dir, 'big', '_no-cwd', 'big.jsonl')
  const smallPath = join(dir, 'small', '_no-cwd', 'small.jsonl')
  mkdirSync(dirname(bigPath), { recursive: true })
  mkdirSync(dirname(smallPath), { recursive: true })
  const w = new LineWriter(`${bigPath}.partial`)
  w.raw(header(meta('big')))
  let seq = 0
  let turn = 0
  let tail
  const emit = (type, data) => {
    const e = { seq, type, time: T0 + seq, data }
    seq++
    w.raw(line(e))
    tail?.push(e)
  }
  emit('request/header', { header: REQUEST_HEADER, reason: 'initial' })
  const turnsUntil = (bytes) => {
    while (w.offset < bytes) for (const [type, data] of turnBody(++turn)) emit(type, data)
  }
  turnsUntil(BIG_BYTES - TAIL_BYTES)
  const k = seq
  const tailOffset = w.offset
  tail = []
  turnsUntil(BIG_BYTES - TAIL_BYTES / 2)
  const c = seq
  emit('history/compact', { summary: `Summary of the session so far. ${TEXT.repeat(6)}`, firstKeptSeq: k })
  emit('request/header', { header: REQUEST_HEADER, reason: 'resume' })
  turnsUntil(BIG_BYTES)
  w.end()
  renameSync(`${bigPath}.partial`, bigPath)
  const bigSize = statSync(bigPath).size

  const s = new LineWriter(smallPath)
  s.raw(header(meta('small')))
  for (const e of tail) {
    const data = e.type === 'history/compact' ? { ...e.data, firstKeptSeq: e.data.firstKeptSeq - k } : e.data
    s.raw(line({ seq: e.seq - k, type: e.type, time: e.time, data }))
  }
  s.end()
  return {
    big: { root: join(dir, 'big'), id: 'big', path: bigPath, size: bigSize, length: seq, k, c, tailOffset, tailBytes: bigSize - tailOffset },
    small: { root: join(dir, 'small'), id: 'small', path: smallPath, size: statSync(smallPath).size, length: tail.length },
  }
}

/** Reused while the manifest matches this file's fixture version and the files are all there. */
function resumeFixtures() {
  const dir = join(WORK, 'resume')
  const manifest = join(dir, 'manifest.json')
  if (existsSync(manifest)) {
    const m = JSON.parse(readFileSync(manifest, 'utf8'))
    if (m.version === FIXTURE_VERSION && m.format === FORMAT && m.bigTarget === BIG_BYTES && existsSync(m.big.path) && statSync(m.big.path).size === m.big.size && existsSync(m.small.path)) {
      console.log(`(reusing the 1 GiB fixture under ${relative(dir)})`)
      return m
    }
  }
  rmSync(dir, { recursive: true, force: true })
  console.log('writing the 1 GiB fixture…')
  const t = now()
  const m = { version: FIXTURE_VERSION, format: FORMAT, bigTarget: BIG_BYTES, ...writeResumeFixtures(dir) }
  writeFileSync(manifest, `${JSON.stringify(m, null, 2)}\n`)
  console.log(`  written in ${((now() - t) / 1000).toFixed(1)} s: ${m.big.length} events, ${(m.big.size / GiB).toFixed(3)} GiB; tail from seq ${m.big.k}: ${m.big.length - m.big.k} events, ${(m.big.tailBytes / MiB).toFixed(3)} MiB; small log ${(m.small.size / MiB).toFixed(3)} MiB`)
  return m
}

/** 100,000 logs of a header and 5 events, in 20 project buckets, with last writes in another order than creation. */
function listFixture() {
  const root = join(WORK, 'list')
  const manifest = join(root, '.manifest.json') // a leading '.': never a bucket
  if (existsSync(manifest)) {
    const m = JSON.parse(readFileSync(manifest, 'utf8'))
    if (m.version === LIST_FIXTURE_VERSION && m.format === FORMAT && m.count === LIST_SESSIONS) {
      console.log(`(reusing the ${LIST_SESSIONS.toLocaleString('en')} sessions under ${relative(root)})`)
      return m
    }
  }
  rmSync(root, { recursive: true, force: true })
  console.log(`writing ${LIST_SESSIONS.toLocaleString('en')} sessions…`)
  const t = now()
  const body = Array.from({ length: 5 }, (_, i) => line({ seq: i, type: 'assistant/chunk', time: T0 + i, data: { turn: 1, step: 0, chunk: { type: 'text-delta', text: TEXT } } })).join('')
  let bytes = 0
  for (let b = 0; b < LIST_BUCKETS; b++) {
    const cwd = `/projects/p${b}`
    const bucket = join(root, bucketName(cwd))
    mkdirSync(bucket, { recursive: true })
    for (let i = b; i < LIST_SESSIONS; i += LIST_BUCKETS) {
      const id = `s${i}`
      const path = join(bucket, `${id}.jsonl`)
      const text = header({ id, cwd, createdAt: T0 + i, delegationDepth: 0 }) + body
      writeFileSync(path, text)
      bytes += text.length
      // Last writes in another order than creation; access times now, so that reading a log
      // does not update its atime (relatime) and dirty 100,000 inodes during the timed runs.
      utimesSync(path, new Date(), new Date(T0 + ((i * 7919) % LIST_SESSIONS) * 1000))
    }
  }
  execFileSync('sync')
  const m = { version: LIST_FIXTURE_VERSION, format: FORMAT, root, count: LIST_SESSIONS, buckets: LIST_BUCKETS, bytes }
  writeFileSync(manifest, `${JSON.stringify(m)}\n`)
  console.log(`  written in ${((now() - t) / 1000).toFixed(1)} s (${(bytes / MiB).toFixed(0)} MiB of logs)`)
  return m
}

const relative = (p) => p.replace(`${process.cwd()}/`, '')

// ---------------------------------------------------------------------------------------------
// Child processes.

const hr = () => process.hrtime.bigint()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Answers clock probes: this process's monotonic clock and its wall-anchored performance clock. */
function answerPings() {
  process.on('message', (m) => {
    if (m?.type === 'ping') process.send({ type: 'pong', i: m.i, hr: String(hr()), perf: performance.timeOrigin + performance.now() })
  })
}

const children = {
  /** One load (or its raw baseline) in a fresh process: time and memory above the process's baseline. */
  async resume([mode, manifestPath]) {
    const m = JSON.parse(readFileSync(manifestPath, 'utf8'))
    const fx = mode.endsWith('-big') ? m.big : m.small
    const p = createJsonlPersistence({ root: fx.root })
    globalThis.gc()
    globalThis.gc()
    const before = process.memoryUsage()
    const t = performance.now()
    let out
    if (mode === 'noop') {
      out = { count: 0 }
    } else if (mode.startsWith('raw-')) {
      try {
        const lines = readFileSync(fx.path, 'utf8').split('\n')
        const parsed = []
        for (let i = 1; i < lines.length; i++) if (lines[i]) parsed.push(JSON.parse(lines[i]))
        out = { count: parsed.length }
      } catch (err) {
        out = { failed: `${err.code ?? 'error'}: ${err.message}` }
      }
    } else {
      const loaded = await p.load(fx.id, mode === 'tail-big' ? { from: 'last-compaction' } : {})
      out = { count: loaded.events.length, firstSeq: loaded.firstSeq, repaired: loaded.repair !== undefined }
      globalThis.keep = loaded
    }
    const ms = performance.now() - t
    const after = process.memoryUsage()
    const peak = peakRssBytes()
    globalThis.gc()
    const retained = process.memoryUsage()
    await p.closeAll()
    process.stdout.write(JSON.stringify({
      ...out,
      ms,
      peakRssAbove: peak - before.rss,
      heapAfterAbove: after.heapUsed + after.external - before.heapUsed - before.external,
      retainedAbove: retained.heapUsed + retained.external - before.heapUsed - before.external,
    }))
  },

  /** The package's watch of one session: the monotonic time at which each event is yielded. */
  async 'watch-pkg'([root, id, initial]) {
    answerPings()
    const p = createJsonlPersistence({ root })
    const seen = []
    const stop = new AbortController()
    process.on('message', (m) => {
      if (m?.type === 'done') {
        process.send({ type: 'times', times: seen })
        stop.abort()
      }
    })
    for await (const e of p.watch(id, { fromSeq: 0, signal: stop.signal })) {
      const t = hr()
      if (e.seq === Number(initial) - 1) process.send({ type: 'ready' })
      else if (e.seq >= Number(initial)) seen.push([e.seq, String(t)])
    }
    process.disconnect()
  },

  /**
   * The raw baseline: fs.watch on the log itself, and on each notification a non-blocking read of
   * the appended bytes from where the last one stopped (one descriptor opened once), split into
   * lines and parsed; the monotonic time at which each line is parsed.
   */
  async 'watch-raw'([path]) {
    answerPings()
    const fd = openSync(path, 'r')
    let pos = statSync(path).size
    const buf = Buffer.allocUnsafe(1 << 16)
    let carry = ''
    const seen = []
    let reading = false
    let again = false
    const drain = () => {
      if (reading) {
        again = true
        return
      }
      reading = true
      readCb(fd, buf, 0, buf.length, pos, (err, n) => {
        if (err) throw err
        if (n > 0) {
          pos += n
          const text = carry + buf.toString('utf8', 0, n)
          const lines = text.split('\n')
          carry = lines.pop()
          for (const line of lines) {
            const e = JSON.parse(line)
            seen.push([e.seq, String(hr())])
          }
          reading = false
          drain() // more may have been appended meanwhile
          return
        }
        reading = false
        if (again) {
          again = false
          drain()
        }
      })
    }
    const w = watch(path, () => drain())
    process.on('message', (m) => {
      if (m?.type === 'done') {
        process.send({ type: 'times', times: seen })
        w.close()
        closeSync(fd)
        process.disconnect()
      }
    })
    process.send({ type: 'ready' })
  },

  /** CPU of an idle process over `ms`: a package watcher at the end of the 1 GiB log, a raw fs.watch, or nothing. */
  async idle([mode, manifestPath, ms]) {
    const m = JSON.parse(readFileSync(manifestPath, 'utf8'))
    const stop = new AbortController()
    let yielded = 0
    if (mode === 'pkg') {
      const p = createJsonlPersistence({ root: m.big.root })
      ;(async () => {
        for await (const _ of p.watch(m.big.id, { fromSeq: m.big.length, signal: stop.signal })) yielded++
      })()
    } else if (mode === 'raw') {
      const w = watch(m.big.path, () => {})
      stop.signal.addEventListener('abort', () => w.close())
    }
    await sleep(1500) // the watcher's first look (a bisection of the 1 GiB log) is not idle time
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    await sleep(Number(ms))
    const cpu = process.cpuUsage(c0)
    const wall = performance.now() - t0
    stop.abort()
    process.stdout.write(JSON.stringify({ cpuPct: ((cpu.user + cpu.system) / 1000 / wall) * 100, userUs: cpu.user, systemUs: cpu.system, wallMs: wall, yielded }))
    process.exit(0)
  },
}

if (process.argv[2] === '--child') {
  await children[process.argv[3]](process.argv.slice(4))
} else {
  await main()
}

// ---------------------------------------------------------------------------------------------
// The parent: runs the sections, records the figures.

async function main() {
  const args = process.argv.slice(2)
  const opt = (name) => {
    const i = args.indexOf(`--${name}`)
    return i === -1 ? undefined : args[i + 1]
  }
  const RUNS = Math.max(5, Number(opt('runs') ?? 7))
  const only = opt('only')?.split(',')
  const keep = args.includes('--keep')
  const wants = (s) => only === undefined || only.includes(s)
  const rows = []
  const started = Date.now()
  const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))

  function record(name, values, unit, target) {
    const s = stats(values)
    const met = target === undefined ? undefined : target[0] === '<=' ? s.median <= target[1] : target[0] === '<' ? s.median < target[1] : s.median >= target[1]
    rows.push({ name, unit, ...s, values, target: target ? `${target[0]} ${fmt(target[1])}` : '', met })
    const t = target ? `  target ${target[0]} ${fmt(target[1])} ${met ? 'MET' : 'NOT MET'}` : ''
    console.log(`${name.padEnd(78)} ${fmt(s.median).padStart(9)} ${unit.padEnd(6)} (min ${fmt(s.min)}, max ${fmt(s.max)})${t}`)
  }
  function note(name, text) {
    rows.push({ name, note: text })
    console.log(`${name.padEnd(78)} ${text}`)
  }
  async function settle() {
    execFileSync('sync')
    await sleep(500)
  }
  const child = (argv, execArgv = []) => {
    const r = spawnSync(process.execPath, [...execArgv, SELF, '--child', ...argv], { encoding: 'utf8', maxBuffer: 1 << 26 })
    if (r.status !== 0) throw new Error(`child ${argv.join(' ')} failed (${r.status}): ${r.stderr}`)
    return JSON.parse(r.stdout)
  }

  console.log(`session-persistence-jsonl: sessions of any length (fixtures in format version ${FORMAT}; ${RUNS} runs each; node ${process.version}; ${cpus().length} × ${cpus()[0]?.model}; ${(totalmem() / GiB).toFixed(0)} GiB)`)
  mkdirSync(WORK, { recursive: true })
  const needsResume = wants('resume') || wants('read') || wants('watch')
  const fx = needsResume ? resumeFixtures() : undefined
  const manifestPath = join(WORK, 'resume', 'manifest.json')

  if (fx) {
    // The fixtures say what they are meant to: a tail load from k, reads of exactly 100 events.
    const p = createJsonlPersistence({ root: fx.big.root })
    const tail = await p.load('big', { from: 'last-compaction' })
    await p.closeAll()
    if (tail.firstSeq !== fx.big.k || tail.events.length !== fx.big.length - fx.big.k || tail.repair) throw new Error(`tail load: firstSeq ${tail.firstSeq}, ${tail.events.length} events`)
    const q = createJsonlPersistence({ root: fx.small.root })
    const small = await q.load('small')
    await q.closeAll()
    if (small.events.length !== fx.small.length) throw new Error('small load')
    const a = toModelHistory(tail.events).messages.length
    const b = toModelHistory(small.events).messages.length
    if (a !== b) throw new Error(`history of the tail (${a} messages) and of the small log (${b}) differ`)
  }

  if (wants('resume')) {
    console.log()
    console.log(`resume: load(id, { from: 'last-compaction' }) of the ${(fx.big.size / GiB).toFixed(2)} GiB log (tail ${(fx.big.tailBytes / MiB).toFixed(2)} MiB, ${fx.big.length - fx.big.k} events) vs load of the ${(fx.small.size / MiB).toFixed(2)} MiB log of the same tail`)
    await settle()
    // Warm, in one process: iterations interleaved, each a fresh instance, load then close (lock included on both sides).
    const warm = []
    for (let run = 0; run < RUNS; run++) {
      const tailMs = []
      const smallMs = []
      for (let i = 0; i < 30; i++) {
        for (const side of i % 2 ? ['small', 'tail'] : ['tail', 'small']) {
          const f = side === 'tail' ? fx.big : fx.small
          const p = createJsonlPersistence({ root: f.root })
          const t = now()
          await p.load(f.id, side === 'tail' ? { from: 'last-compaction' } : {})
          const ms = now() - t
          await p.closeAll()
          ;(side === 'tail' ? tailMs : smallMs).push(ms)
        }
      }
      warm.push({ tail: median(tailMs), small: median(smallMs) })
    }
    record('resume, warm process: tail load of 1 GiB log, ms (median of 30 loads)', warm.map((r) => r.tail), 'ms')
    record('resume, warm process: full load of the 1 MiB log, ms', warm.map((r) => r.small), 'ms')
    record('resume, warm process: tail load of 1 GiB / full load of 1 MiB', warm.map((r) => r.tail / r.small), '×', ['<=', 1.2])

    // Cold, one fresh process per load (--expose-gc): time and memory above the process's baseline.
    await settle()
    // The four small probes in a rotating order, then the two that read the whole 1 GiB log.
    const small = ['tail-big', 'full-small', 'raw-small', 'noop']
    const cold = []
    for (let run = 0; run < RUNS; run++) {
      const r = {}
      const order = [...small.slice(run % small.length), ...small.slice(0, run % small.length), 'full-big', 'raw-big']
      for (const mode of order) r[mode] = child(['resume', mode, manifestPath], ['--expose-gc', '--max-old-space-size=8192'])
      if (r['tail-big'].firstSeq !== fx.big.k) throw new Error('the tail load did not start at the compaction')
      cold.push(r)
      process.stdout.write(`  cold run ${run + 1}/${RUNS}: tail ${fmt(r['tail-big'].ms)} ms, small ${fmt(r['full-small'].ms)} ms, full 1 GiB ${fmt(r['full-big'].ms)} ms\n`)
    }
    const tailBound = 16 + (4 * fx.big.tailBytes) / MiB
    record('resume, fresh process: tail load of 1 GiB log, ms', cold.map((r) => r['tail-big'].ms), 'ms')
    record('resume, fresh process: full load of the 1 MiB log, ms', cold.map((r) => r['full-small'].ms), 'ms')
    record('resume, fresh process: tail load of 1 GiB / full load of 1 MiB', cold.map((r) => r['tail-big'].ms / r['full-small'].ms), '×', ['<=', 1.2])
    record('resume: tail load, peak RSS above the process baseline, MiB', cold.map((r) => r['tail-big'].peakRssAbove / MiB), 'MiB', ['<=', tailBound])
    record('resume: full load of the 1 MiB log, peak RSS above baseline, MiB', cold.map((r) => r['full-small'].peakRssAbove / MiB), 'MiB')
    record('resume: a process that loads nothing, peak RSS above baseline, MiB (floor)', cold.map((r) => r.noop.peakRssAbove / MiB), 'MiB')
    record('resume: tail load, heap + external after the load above baseline, MiB', cold.map((r) => r['tail-big'].heapAfterAbove / MiB), 'MiB')
    record('resume: tail load, retained after gc (the loaded session), MiB', cold.map((r) => r['tail-big'].retainedAbove / MiB), 'MiB')
    record('resume: raw readFileSync+split+JSON.parse of the 1 MiB log, ms', cold.map((r) => r['raw-small'].ms), 'ms')
    record('resume: tail load of 1 GiB / raw readFileSync+split+JSON.parse of 1 MiB', cold.map((r) => r['tail-big'].ms / r['raw-small'].ms), '×')
    record('resume: full load of the same 1 GiB log (from: start), ms', cold.map((r) => r['full-big'].ms), 'ms')
    record('resume: full load of 1 GiB, peak RSS above baseline, GiB', cold.map((r) => r['full-big'].peakRssAbove / GiB), 'GiB')
    record('resume: full load of 1 GiB / tail load of it', cold.map((r) => r['full-big'].ms / r['tail-big'].ms), '×')
    const rawBig = cold.map((r) => r['raw-big'])
    const failures = [...new Set(rawBig.map((r) => r.failed ?? 'succeeded'))]
    note('resume: raw readFileSync+split+JSON.parse of the 1 GiB log', `${rawBig.filter((r) => r.failed).length} of ${rawBig.length} runs failed: ${failures.join('; ')} (after a median ${fmt(median(rawBig.map((r) => r.ms)))} ms)`)
  }

  if (wants('read')) {
    console.log()
    console.log('read: { last: 100 } and a 100-event page from the middle, 1 GiB log vs 1 MiB log (no lock; warm page cache)')
    await settle()
    const runs = []
    for (let run = 0; run < RUNS; run++) {
      const big = createJsonlPersistence({ root: fx.big.root })
      const small = createJsonlPersistence({ root: fx.small.root })
      // Pages at 40–60 % of each log, the same relative places on both, a different one each round.
      const page = (len, i) => Math.floor(len * (0.4 + (0.2 * ((i * 37) % 101)) / 100))
      const check = (r, from) => {
        if (r.events.length !== 100 || (from !== undefined && r.firstSeq !== from)) throw new Error(`read returned ${r.events.length} events from ${r.firstSeq}`)
      }
      const contenders = [
        ['last-big', async () => check(await big.read('big', { last: 100 }))],
        ['last-small', async () => check(await small.read('small', { last: 100 }))],
        ['mid-big', async (i) => {
          const from = page(fx.big.length, i)
          check(await big.read('big', { fromSeq: from, toSeq: from + 100 }), from)
        }],
        ['mid-small', async (i) => {
          const from = page(fx.small.length, i)
          check(await small.read('small', { fromSeq: from, toSeq: from + 100 }), from)
        }],
      ]
      await interleave(contenders, 20) // warm-up: JIT, the pages the probes touch
      const { rounds } = await interleave(contenders, 300, { perRound: true })
      runs.push(Object.fromEntries(Object.entries(rounds).map(([k, v]) => [k, median(v)])))
    }
    record('read { last: 100 } of the 1 GiB log, ms (median of 300)', runs.map((r) => r['last-big']), 'ms')
    record('read { last: 100 } of the 1 MiB log, ms', runs.map((r) => r['last-small']), 'ms')
    record('read { last: 100 }: 1 GiB / 1 MiB', runs.map((r) => r['last-big'] / r['last-small']), '×', ['<=', 1.5])
    record('read of 100 events from the middle of the 1 GiB log, ms', runs.map((r) => r['mid-big']), 'ms')
    record('read of 100 events from the middle of the 1 MiB log, ms', runs.map((r) => r['mid-small']), 'ms')
    record('read of 100 events from the middle: 1 GiB / 1 MiB', runs.map((r) => r['mid-big'] / r['mid-small']), '×', ['<=', 1.5])
    // What each read asks of the file system (counted through the seam, one read of each kind).
    for (const [label, root, id, range] of [
      ['last 100, 1 GiB', fx.big.root, 'big', { last: 100 }],
      ['last 100, 1 MiB', fx.small.root, 'small', { last: 100 }],
      ['middle page, 1 GiB', fx.big.root, 'big', { fromSeq: Math.floor(fx.big.length / 2), toSeq: Math.floor(fx.big.length / 2) + 100 }],
      ['middle page, 1 MiB', fx.small.root, 'small', { fromSeq: Math.floor(fx.small.length / 2), toSeq: Math.floor(fx.small.length / 2) + 100 }],
    ]) {
      const counted = countingFs()
      await createJsonlPersistence({ root, fs: counted.fs }).read(id, range)
      note(`read, ${label}: file reads`, `${counted.reads} reads, ${(counted.bytes / 1024).toFixed(0)} KiB read`)
    }
  }

  if (wants('watch')) {
    console.log()
    console.log('watch: latency from another process\'s append resolving to the event yielded, vs raw fs.watch + read of the appended bytes')
    await settle()
    // The writer's append resolves after its fdatasync, and a watcher can see the line as soon as
    // the write lands, before the sync: with sync 'data' the raw baseline's latency from the
    // append resolving is negative. With sync 'none' an append resolves when its write has
    // landed, so that is where the latency of a watcher is measured and the target applies; the
    // default mode is reported beside it, from the append being called.
    for (const sync of ['none', 'data']) {
      const runs = []
      for (let run = 0; run < RUNS; run++) runs.push(await watchRun(run, sync))
      const w = `watch, writer sync '${sync}'`
      record(`${w}: package, median latency from append resolved to yielded, ms`, runs.map((r) => r.pkg), 'ms')
      record(`${w}: raw fs.watch + read, the same, ms`, runs.map((r) => r.raw), 'ms')
      record(`${w}: package / raw fs.watch + read (from append resolved)`, runs.map((r) => r.pkg / r.raw), '×', sync === 'none' ? ['<=', 2] : undefined)
      record(`${w}: package − raw (what the package's watcher adds), ms`, runs.map((r) => r.pkg - r.raw), 'ms')
      record(`${w}: package, median latency from append called to yielded, ms`, runs.map((r) => r.pkgFromCall), 'ms')
      record(`${w}: raw, median latency from append called to read, ms`, runs.map((r) => r.rawFromCall), 'ms')
      record(`${w}: package / raw (from append called)`, runs.map((r) => r.pkgFromCall / r.rawFromCall), '×')
      record(`${w}: package, 90th percentile from append resolved, ms`, runs.map((r) => r.pkgP90), 'ms')
      record(`${w}: raw, 90th percentile from append resolved, ms`, runs.map((r) => r.rawP90), 'ms')
      record(`${w}: the append as the writer saw it, ms`, runs.map((r) => r.append), 'ms')
      record(`${w}: clock check, |offset| of the children's monotonic clock, µs`, runs.map((r) => r.hrOffsetUs), 'µs')
      record(`${w}: clock check, round trip of the best probe, µs`, runs.map((r) => r.rttUs), 'µs')
      record(`${w}: clock check, |offset| of timeOrigin + performance.now(), µs`, runs.map((r) => r.perfOffsetUs), 'µs')
    }

    await settle()
    const IDLE_MS = 10_000
    const idle = []
    for (let run = 0; run < RUNS; run++) {
      // The three idle processes at once: they wait, so they do not compete.
      const spawnIdle = (mode) =>
        new Promise((ok, fail) => {
          const c = fork(SELF, ['--child', 'idle', mode, manifestPath, String(IDLE_MS)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
          let out = ''
          c.stdout.on('data', (d) => (out += d))
          c.on('exit', (code) => (code === 0 ? ok(JSON.parse(out)) : fail(new Error(`idle ${mode} exited ${code}`))))
        })
      const [pkg, raw, none] = await Promise.all([spawnIdle('pkg'), spawnIdle('raw'), spawnIdle('none')])
      idle.push({ pkg, raw, none })
    }
    record(`watch: idle package watcher at the end of the 1 GiB log, CPU over ${IDLE_MS / 1000} s, % of a core`, idle.map((r) => r.pkg.cpuPct), '%', ['<', 1])
    record('watch: idle raw fs.watch, the same, %', idle.map((r) => r.raw.cpuPct), '%')
    record('watch: idle node process with no watcher, the same, %', idle.map((r) => r.none.cpuPct), '%')
  }

  if (wants('list')) {
    console.log()
    const lf = listFixture()
    const listThreads = peekWorkerCount(LIST_SESSIONS)
    console.log(`list: ${LIST_SESSIONS.toLocaleString('en')} sessions in ${LIST_BUCKETS} buckets; { orderBy: 'lastWrite', limit: 50 } vs list() vs raw readdir + open/read 4 KiB/close (the faster of 32 asynchronous calls at a time on this thread and synchronous calls on the ${listThreads} worker thread(s) the listing uses)`)
    await settle()
    // One untimed pass of each: the first listing after writing the fixture pays for cold dentries.
    await createJsonlPersistence({ root: lf.root }).list()
    await rawList(lf.root)
    const runs = []
    for (let run = 0; run < RUNS; run++) {
      const r = {}
      const contenders = [
        ['full', async () => {
          const n = (await createJsonlPersistence({ root: lf.root }).list()).length
          if (n !== LIST_SESSIONS) throw new Error(`listed ${n}`)
        }],
        ['picker', async () => {
          const l = await createJsonlPersistence({ root: lf.root }).list({ orderBy: 'lastWrite', limit: 50 })
          if (l.length !== 50 || l[0].mtimeMs < l[49].mtimeMs) throw new Error('picker')
        }],
        ['raw', async () => {
          const n = await rawList(lf.root)
          if (n !== LIST_SESSIONS) throw new Error(`raw read ${n}`)
        }],
        // The floor of the picker's ratio: what one stat of each log (§15.4's price of the order)
        // costs here against one header read of each, both raw and synchronous on one thread.
        ['rawStat', async () => {
          const n = rawSyncList(lf.root, false)
          if (n !== LIST_SESSIONS) throw new Error(`raw stat ${n}`)
        }],
        ['rawHeads', async () => {
          const n = rawSyncList(lf.root, true)
          if (n !== LIST_SESSIONS) throw new Error(`raw heads ${n}`)
        }],
        // The same floor with both of this machine's cores: the buckets split between two threads.
        ['rawStat2', async () => {
          const n = await rawThreadsList(lf.root, false, 2)
          if (n !== LIST_SESSIONS) throw new Error(`raw stat, 2 threads ${n}`)
        }],
        ['rawHeads2', async () => {
          const n = await rawThreadsList(lf.root, true, 2)
          if (n !== LIST_SESSIONS) throw new Error(`raw heads, 2 threads ${n}`)
        }],
        // The raw strategy the listing itself uses: synchronous calls on as many worker threads.
        ...(listThreads === 2
          ? []
          : [['rawHeadsN', async () => {
              const n = await rawThreadsList(lf.root, true, listThreads)
              if (n !== LIST_SESSIONS) throw new Error(`raw heads, ${listThreads} threads ${n}`)
            }]]),
      ]
      for (let k = 0; k < contenders.length; k++) {
        const [name, fn] = contenders[(run + k) % contenders.length]
        globalThis.gc?.()
        const t = now()
        await fn()
        r[name] = now() - t
      }
      r.rawHeadsN ??= r.rawHeads2
      // The baseline: the faster raw strategy of this run.
      r.rawBest = Math.min(r.raw, r.rawHeadsN)
      runs.push(r)
      process.stdout.write(`  run ${run + 1}/${RUNS}: list() ${fmt(r.full)} ms, picker ${fmt(r.picker)} ms, raw ${fmt(r.raw)} ms, raw sync stat ${fmt(r.rawStat)} ms, raw sync heads ${fmt(r.rawHeads)} ms, on 2 threads ${fmt(r.rawStat2)} / ${fmt(r.rawHeads2)} ms\n`)
    }
    record(`list() of ${LIST_SESSIONS.toLocaleString('en')} sessions, ms`, runs.map((r) => r.full), 'ms')
    record("list({ orderBy: 'lastWrite', limit: 50 }), ms", runs.map((r) => r.picker), 'ms')
    record('raw readdir + open/read 4 KiB/close of every log, 32 asynchronous calls at a time, ms', runs.map((r) => r.raw), 'ms')
    record(`raw readdir + open/read 4 KiB/fstat/close of every log, synchronous on ${listThreads} thread(s) as the listing, ms`, runs.map((r) => r.rawHeadsN), 'ms')
    record("list({ orderBy: 'lastWrite', limit: 50 }) / list()", runs.map((r) => r.picker / r.full), '×', ['<=', 0.25])
    record('list() / raw readdir + open/read 4 KiB/close (the faster raw strategy of each run)', runs.map((r) => r.full / r.rawBest), '×', ['<=', 1.5])
    record('list() / raw with 32 asynchronous calls on one thread (the baseline before the listing used worker threads)', runs.map((r) => r.full / r.raw), '×')
    record('raw, synchronous on one thread: readdir + stat of every log, ms', runs.map((r) => r.rawStat), 'ms')
    record('raw, synchronous on one thread: readdir + open/read 4 KiB/fstat/close of every log, ms', runs.map((r) => r.rawHeads), 'ms')
    record('floor of picker / list() under §15.4 (one stat a log): raw sync stat / raw sync heads', runs.map((r) => r.rawStat / r.rawHeads), '×')
    record('raw on two threads (buckets split): readdir + stat of every log, ms', runs.map((r) => r.rawStat2), 'ms')
    record('raw on two threads (buckets split): readdir + open/read 4 KiB/fstat/close, ms', runs.map((r) => r.rawHeads2), 'ms')
    record('the same floor on two threads: raw stat / raw heads, both on two threads', runs.map((r) => r.rawStat2 / r.rawHeads2), '×')
    record('raw stat on two threads / raw heads on one (a picker given both cores, a listing one)', runs.map((r) => r.rawStat2 / r.rawHeads), '×')
    const counted = countingFs()
    await createJsonlPersistence({ root: lf.root, fs: counted.fs }).list({ orderBy: 'lastWrite', limit: 50 })
    note("list({ orderBy: 'lastWrite', limit: 50 }): file-system calls", `${counted.stats} stat, ${counted.opens} open, ${counted.reads} read (${(counted.bytes / 1024).toFixed(0)} KiB)`)
  }

  if (only?.includes('list-cold')) {
    console.log()
    const lf = listFixture()
    console.log(`list, cold caches: before each timed call, dirty pages written and the page, dentry and inode caches dropped (as after a reboot)`)
    const dropCaches = () => {
      execFileSync('sync')
      writeFileSync('/proc/sys/vm/drop_caches', '3')
    }
    let canDrop = true
    try {
      dropCaches()
    } catch (err) {
      canDrop = false
      console.log(`  skipped: cannot drop the caches here (${err.code ?? err.message}); it needs root on Linux`)
    }
    const runs = []
    for (let run = 0; canDrop && run < RUNS; run++) {
      const r = {}
      const contenders = [
        ['full', async () => (await createJsonlPersistence({ root: lf.root }).list()).length === LIST_SESSIONS],
        ['picker', async () => (await createJsonlPersistence({ root: lf.root }).list({ orderBy: 'lastWrite', limit: 50 })).length === 50],
        ['raw', async () => (await rawList(lf.root)) === LIST_SESSIONS],
        ['rawStat', async () => rawSyncList(lf.root, false) === LIST_SESSIONS],
        ['rawHeads', async () => rawSyncList(lf.root, true) === LIST_SESSIONS],
        ['rawHeadsN', async () => (await rawThreadsList(lf.root, true, peekWorkerCount(LIST_SESSIONS))) === LIST_SESSIONS],
      ]
      for (let k = 0; k < contenders.length; k++) {
        const [name, fn] = contenders[(run + k) % contenders.length]
        dropCaches()
        globalThis.gc?.()
        const t = now()
        if (!(await fn())) throw new Error(`cold ${name}: wrong count`)
        r[name] = now() - t
      }
      runs.push(r)
      process.stdout.write(`  run ${run + 1}/${RUNS}: list() ${fmt(r.full)} ms, picker ${fmt(r.picker)} ms, raw ${fmt(r.raw)} ms, raw sync stat ${fmt(r.rawStat)} ms, raw sync heads ${fmt(r.rawHeads)} ms\n`)
    }
    if (canDrop) {
      record(`cold: list() of ${LIST_SESSIONS.toLocaleString('en')} sessions, ms`, runs.map((r) => r.full), 'ms')
      record("cold: list({ orderBy: 'lastWrite', limit: 50 }), ms", runs.map((r) => r.picker), 'ms')
      record('cold: raw readdir + open/read 4 KiB/close of every log, ms', runs.map((r) => r.raw), 'ms')
      record("cold: list({ orderBy: 'lastWrite', limit: 50 }) / list()", runs.map((r) => r.picker / r.full), '×', ['<=', 0.25])
      record(`cold: raw readdir + open/read 4 KiB/fstat/close, synchronous on ${peekWorkerCount(LIST_SESSIONS)} thread(s) as the listing, ms`, runs.map((r) => r.rawHeadsN), 'ms')
      record('cold: list() / raw readdir + open/read 4 KiB/close (the faster raw strategy of each run)', runs.map((r) => r.full / Math.min(r.raw, r.rawHeadsN)), '×', ['<=', 1.5])
      record('cold: list() / raw with 32 asynchronous calls on one thread (the baseline before the listing used worker threads)', runs.map((r) => r.full / r.raw), '×')
      record('cold: raw sync stat / raw sync heads (the floor of the picker ratio)', runs.map((r) => r.rawStat / r.rawHeads), '×')
    }
  }

  // The file holds one invocation's figures (the sections it ran); a smoke test with smaller
  // fixtures writes none.
  const smoke = process.env.SPJ_ANY_LENGTH_BIG_MIB !== undefined || process.env.SPJ_ANY_LENGTH_SESSIONS !== undefined
  if (!smoke) {
    writeFileSync(
      new URL('../results-any-length.json', import.meta.url),
      `${JSON.stringify({ date: new Date().toISOString(), command: `node bench/scenarios/any-length.mjs${args.length ? ` ${args.join(' ')}` : ''}`, formatVersion: FORMAT, node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, runs: RUNS, fixture: fx ? { bigBytes: fx.big.size, bigEvents: fx.big.length, tailBytes: fx.big.tailBytes, tailEvents: fx.big.length - fx.big.k, smallBytes: fx.small.size } : undefined, rows }, null, 2)}\n`,
    )
  }
  const missed = rows.filter((r) => r.met === false)
  console.log()
  console.log(missed.length === 0 ? 'All targets met.' : `Targets not met: ${missed.map((r) => r.name).join('; ')}`)
  if (!keep) {
    rmSync(WORK, { recursive: true, force: true })
    console.log('(fixtures deleted; --keep keeps them for the next run)')
  }
  console.log(`(${((Date.now() - started) / 1000).toFixed(0)} s)`)

  /** One run of the watch latency: this process appends, alternately to two sessions, each followed by one child. */
  async function watchRun(run, sync) {
    const root = join(WORK, `watch-${run}`)
    rmSync(root, { recursive: true, force: true })
    const COUNT = 150
    const INITIAL = 10
    const w = createJsonlPersistence({ root, sync })
    const ids = { pkg: 'watched-pkg', raw: 'watched-raw' }
    const seqs = { pkg: INITIAL, raw: INITIAL }
    for (const [who, id] of Object.entries(ids)) {
      await w.create(meta(id, { cwd: `/watch/${who}` })) // buckets of their own: one watcher's directory never sees the other's writes
      await w.append(id, Array.from({ length: INITIAL }, (_, i) => chunkEvent(i)))
    }
    const rawPath = join(root, bucketName('/watch/raw'), `${ids.raw}.jsonl`)
    const procs = {
      pkg: fork(SELF, ['--child', 'watch-pkg', root, ids.pkg, String(INITIAL)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
      raw: fork(SELF, ['--child', 'watch-raw', rawPath], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    }
    const nextMessage = (proc, type) => new Promise((ok) => {
      const on = (m) => {
        if (m?.type === type) {
          proc.off('message', on)
          ok(m)
        }
      }
      proc.on('message', on)
    })
    await Promise.all(Object.values(procs).map((p) => nextMessage(p, 'ready')))
    // Clock check: the children's CLOCK_MONOTONIC (process.hrtime) should be this process's; the
    // best of 20 round trips bounds the offset by half its round trip.
    const clock = async (proc) => {
      let best
      for (let i = 0; i < 20; i++) {
        const t0 = hr()
        const p0 = performance.timeOrigin + performance.now()
        const reply = nextMessage(proc, 'pong')
        proc.send({ type: 'ping', i })
        const m = await reply
        const t1 = hr()
        const p1 = performance.timeOrigin + performance.now()
        const rtt = Number(t1 - t0) / 1000
        if (!best || rtt < best.rtt) best = { rtt, hr: Number(BigInt(m.hr) - (t0 + t1) / 2n) / 1000, perf: (m.perf - (p0 + p1) / 2) * 1000 }
      }
      return best
    }
    const clocks = [await clock(procs.pkg), await clock(procs.raw)]
    await sleep(200)
    const resolved = { pkg: new Map(), raw: new Map() }
    const called = { pkg: new Map(), raw: new Map() }
    const appendMs = []
    for (let i = 0; i < COUNT; i++) {
      for (const who of i % 2 ? ['raw', 'pkg'] : ['pkg', 'raw']) {
        await sleep(8 + ((i * 7) % 9)) // 8–16 ms apart: each watcher has settled before the next append
        const seq = seqs[who]++
        const t0 = hr()
        await w.append(ids[who], [chunkEvent(seq)])
        const t1 = hr()
        called[who].set(seq, t0)
        resolved[who].set(seq, t1)
        appendMs.push(Number(t1 - t0) / 1e6)
      }
    }
    await sleep(300)
    const times = {}
    for (const [who, proc] of Object.entries(procs)) {
      const reply = nextMessage(proc, 'times')
      proc.send({ type: 'done' })
      times[who] = (await reply).times
      await new Promise((ok) => (proc.exitCode !== null ? ok() : proc.once('exit', ok)))
    }
    await w.closeAll()
    rmSync(root, { recursive: true, force: true })
    const lat = (who, from) => {
      if (times[who].length !== COUNT) throw new Error(`${who} watcher saw ${times[who].length} of ${COUNT} events`)
      return times[who].map(([seq, t]) => Number(BigInt(t) - from[who].get(seq)) / 1e6)
    }
    const p90 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]
    const pkg = lat('pkg', resolved)
    const raw = lat('raw', resolved)
    for (const c of clocks) if (Math.abs(c.hr) > c.rtt / 2 + 1) throw new Error(`the children's monotonic clock is off by ${c.hr} µs (round trip ${c.rtt} µs)`)
    return {
      pkg: median(pkg),
      raw: median(raw),
      pkgP90: p90(pkg),
      rawP90: p90(raw),
      pkgFromCall: median(lat('pkg', called)),
      rawFromCall: median(lat('raw', called)),
      append: median(appendMs),
      hrOffsetUs: Math.max(...clocks.map((c) => Math.abs(c.hr))),
      rttUs: Math.max(...clocks.map((c) => c.rtt)),
      perfOffsetUs: Math.max(...clocks.map((c) => Math.abs(c.perf))),
    }
  }
}

function chunkEvent(seq) {
  return { seq, type: 'assistant/chunk', time: T0 + seq, data: { turn: 1, step: 0, chunk: { type: 'text-delta', text: TEXT } } }
}

/** The package's own file system with its calls counted: opens, stats, reads and bytes read. */
function countingFs() {
  const base = createNodeFileSystem()
  const c = { opens: 0, stats: 0, reads: 0, bytes: 0 }
  const fs = Object.create(base)
  fs.stat = (path) => {
    c.stats++
    return base.stat(path)
  }
  // A listing of many logs looks at them through peekFiles (a worker): a stat of each path when
  // it reads no bytes; an open, a read and an fstat of each when it reads the heads.
  if (base.peekFiles) {
    // The paths come as a list, or in chunks (a build whose seam says peekChunks, inherited here).
    const count = (n) => {
      if (headBytes === 0) c.stats += n
      else {
        c.opens += n
        c.reads += n
      }
    }
    let headBytes
    fs.peekFiles = (paths, bytes, options) => {
      headBytes = bytes
      if (Array.isArray(paths)) {
        count(paths.length)
        return base.peekFiles(paths, bytes, options)
      }
      return base.peekFiles(
        (async function* () {
          for await (const chunk of paths) {
            count(chunk.length)
            yield chunk
          }
        })(),
        bytes,
        options,
      )
    }
  }
  fs.open = async (path, flags, mode) => {
    c.opens++
    const h = await base.open(path, flags, mode)
    return {
      read: async (buffer, offset, length, position) => {
        c.reads++
        const n = await h.read(buffer, offset, length, position)
        c.bytes += n
        return n
      },
      write: (...a) => h.write(...a),
      sync: () => h.sync(),
      datasync: () => h.datasync(),
      truncate: (n) => h.truncate(n),
      stat: () => h.stat(),
      chmod: (m) => h.chmod(m),
      close: () => h.close(),
    }
  }
  return Object.assign(c, { fs })
}

/**
 * readdir of the root and of every bucket, then of every log a stat (`heads` false) or an
 * open/read 4 KiB/fstat/close (what a listing needs of each: its header, size and mtime), all
 * synchronous on this thread: no thread-pool round trips, nothing parsed.
 */
function rawSyncList(root, heads) {
  const buf = Buffer.allocUnsafe(4096)
  let n = 0
  for (const b of readdirSync(root, { withFileTypes: true })) {
    if (!b.isDirectory() || b.name.startsWith('.')) continue
    const dir = join(root, b.name)
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.jsonl')) continue
      const path = `${dir}/${name}`
      if (heads) {
        const fd = openSync(path, 'r')
        readSync(fd, buf, 0, 4096, 0)
        fstatSync(fd)
        closeSync(fd)
      } else statSync(path)
      n++
    }
  }
  return n
}

/**
 * `rawSyncList` on `threads` worker threads, the buckets dealt out between them (each thread's
 * readdirs and calls synchronous, as the package's listing worker makes them); its start-up included.
 */
async function rawThreadsList(root, heads, threads) {
  const { Worker } = await import('node:worker_threads')
  const buckets = readdirSync(root, { withFileTypes: true }).filter((b) => b.isDirectory() && !b.name.startsWith('.')).map((b) => join(root, b.name))
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const fs = require('node:fs')
    const buf = Buffer.allocUnsafe(4096)
    let n = 0
    for (const dir of workerData.buckets) {
      for (const name of fs.readdirSync(dir)) {
        if (!name.endsWith('.jsonl')) continue
        const path = dir + '/' + name
        if (workerData.heads) {
          const fd = fs.openSync(path, 'r')
          fs.readSync(fd, buf, 0, 4096, 0)
          fs.fstatSync(fd)
          fs.closeSync(fd)
        } else fs.statSync(path)
        n++
      }
    }
    parentPort.postMessage(n)`
  const shares = Array.from({ length: threads }, (_, k) => buckets.filter((_, i) => i % threads === k))
  const counts = await Promise.all(
    shares.map((share) => new Promise((ok, fail) => new Worker(source, { eval: true, workerData: { buckets: share, heads } }).once('message', ok).once('error', fail))),
  )
  return counts.reduce((a, b) => a + b, 0)
}

/** readdir of the root and of every bucket, then open/read 4 KiB/close of every log, 32 at a time (callback API). */
async function rawList(root) {
  const cb = (start) => new Promise((ok, fail) => start((err, v) => (err ? fail(err) : ok(v))))
  const buckets = (await cb((k) => readdirCb(root, { withFileTypes: true }, k))).filter((d) => d.isDirectory() && !d.name.startsWith('.'))
  const files = []
  for (const b of buckets) {
    for (const name of await cb((k) => readdirCb(join(root, b.name), k))) if (name.endsWith('.jsonl')) files.push(join(root, b.name, name))
  }
  let next = 0
  let done = 0
  const worker = async () => {
    const buf = Buffer.allocUnsafe(4096)
    while (next < files.length) {
      const path = files[next++]
      const fd = await cb((k) => openCb(path, 'r', k))
      await cb((k) => readCb(fd, buf, 0, 4096, 0, k))
      await cb((k) => closeCb(fd, k))
      done++
    }
  }
  await Promise.all(Array.from({ length: 32 }, worker))
  return done
}
