// Format version 1 (§16) against version 0 and raw baselines, measured in the same run, medians
// of per-round ratios (rounds interleave the contenders):
//   - append, batch of 10, version 1 vs version 0 (target ≤ 1.03×)
//   - load of 100k events, version 1 vs a raw readFileSync + split + zlib.crc32 + JSON.parse of
//     the same lines (target ≥ 1.0× its speed) and vs the raw baseline without checksums
//     (target ≥ 0.9×); version 0 beside it
//   - migrate of a 1 GiB log vs a raw read + write + fsync of the same bytes (target ≥ 0.8× its
//     speed), with the migrating process's peak RSS, and the floors of a migrate that checks
//     what it seals: the raw copy with a JSON.parse + crc32 of each line, on one thread and on
//     every core
// Usage: npm run build && node bench/scenarios/format-v1.mjs [--rounds N] [--migrate-mib N] [--skip-migrate]
import { execFileSync, spawnSync } from 'node:child_process'
import { closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, writeSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { crc32 } from 'node:zlib'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, event, events, median, now, scratch } from '../lib.mjs'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, 'migrate-mib': { type: 'string', default: '1024' }, 'skip-migrate': { type: 'boolean', default: false } } })
const ROUNDS = Number(values.rounds)
const dir = scratch('format-v1')
const meta = (id) => ({ id, createdAt: 1, delegationDepth: 0 })
const fmt = (x) => `${x.toFixed(3)}×`
const ratios = (xs) => `median ${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}, ${xs.length} rounds)`

try {
  // --- append, batch of 10 -------------------------------------------------------------------
  {
    const BATCHES = 400
    const perRound = []
    for (let r = 0; r < ROUNDS; r++) {
      const times = {}
      for (const version of r % 2 ? [1, 0] : [0, 1]) {
        const p = createJsonlPersistence({ root: join(dir, `append-${r}-${version}`), formatVersion: version })
        await p.create(meta('a'))
        await p.append('a', events(0, 10)) // materialized before timing
        const t = now()
        for (let b = 1; b <= BATCHES; b++) await p.append('a', events(b * 10, 10))
        times[version] = now() - t
        await p.closeAll()
      }
      perRound.push(times[1] / times[0])
    }
    console.log(`append, batch 10, ${BATCHES} batches: version 1 / version 0 time ${ratios(perRound)} (target ≤ 1.03×)`)
  }

  // --- load of 100k events -------------------------------------------------------------------
  {
    const N = 100_000
    const roots = {}
    for (const version of [0, 1]) {
      roots[version] = join(dir, `load-${version}`)
      const p = createJsonlPersistence({ root: roots[version], formatVersion: version, sync: 'none' })
      await p.create(meta('l'))
      for (let i = 0; i < N; i += 10_000) await p.append('l', events(i, 10_000))
      await p.append('l', [{ seq: N, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }])
      await p.closeAll()
    }
    const path1 = createJsonlPersistence({ root: roots[1] }).locate(meta('l')).path
    // The raw baselines read the version-1 file: split, check each line's CRC, parse.
    const rawCrc = () => {
      const lines = readFileSync(path1, 'utf8').split('\n')
      lines.pop()
      const out = []
      for (let i = 1; i < lines.length; i++) {
        const line = lines[i]
        const p = line.slice(0, -18)
        if (crc32(p).toString(16).padStart(8, '0') !== line.slice(-10, -2)) throw new Error('bad crc')
        out.push(JSON.parse(`${p}}`))
      }
      return out.length
    }
    const path0 = createJsonlPersistence({ root: roots[0] }).locate(meta('l')).path
    // Keeps what it parses, as a load (and rawCrc) does: the cost of holding 100k events is on both sides.
    const rawOf = (path) => () => {
      const lines = readFileSync(path, 'utf8').split('\n')
      lines.pop()
      const out = []
      for (let i = 1; i < lines.length; i++) out.push(JSON.parse(lines[i]))
      return out.length
    }
    const raw = rawOf(path1)
    const raw0 = rawOf(path0)
    const load = async (version) => {
      const p = createJsonlPersistence({ root: roots[version] })
      const { events: got } = await p.load('l')
      await p.closeAll()
      return got.length
    }
    const vsCrc = []
    const vsRaw = []
    const v0 = []
    const contenders = [['v1', () => load(1)], ['crc', rawCrc], ['raw', raw], ['v0', () => load(0)], ['raw0', raw0]]
    for (let r = 0; r < ROUNDS + 1; r++) {
      const t = {}
      // Rotated each round: what one leaves for the collector is not always collected in the same next one.
      for (let k = 0; k < contenders.length; k++) {
        const [name, run] = contenders[(r + k) % contenders.length]
        const s = now()
        const n = await run()
        t[name] = now() - s
        if (n !== N + 1) throw new Error(`${name} read ${n} events`)
      }
      if (r === 0) continue // warm-up round
      vsCrc.push(t.crc / t.v1)
      vsRaw.push(t.raw / t.v1)
      v0.push(t.raw0 / t.v0) // the version-0 file's own raw read
    }
    console.log(`load of ${N} events, version 1: speed vs raw split + crc32 + JSON.parse ${ratios(vsCrc)} (target ≥ 1.0×)`)
    console.log(`load of ${N} events, version 1: speed vs raw split + JSON.parse (no checksum) ${ratios(vsRaw)} (target ≥ 0.9×)`)
    console.log(`load of ${N} events, version 0: speed vs raw split + JSON.parse ${ratios(v0)} (beside it)`)
  }

  // --- migrate of a 1 GiB log -----------------------------------------------------------------
  if (!values['skip-migrate']) {
    const MIB = Number(values['migrate-mib'])
    const src = join(dir, 'migrate-src.jsonl')
    // A version-0 log written directly, as the package writes it: a header, then ~400-byte lines.
    const fd = openSync(src, 'w')
    writeSync(fd, `${JSON.stringify({ type: 'session', version: 0, id: 'm', createdAt: 1, delegationDepth: 0 })}\n`)
    let seq = 0
    let written = 0
    while (written < MIB * 1024 * 1024) {
      const block = []
      for (let i = 0; i < 2_000; i++) block.push(`${JSON.stringify(event(seq++))}\n`)
      const text = block.join('')
      writeSync(fd, text)
      written += Buffer.byteLength(text)
    }
    writeSync(fd, `${JSON.stringify({ seq: seq++, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } })}\n`)
    closeSync(fd)
    const size = statSync(src).size
    /** Reads the source 1 MiB at a time, writes what `pass` makes of each read, fsyncs; ms. */
    const timedCopy = (pass) => {
      const s = now()
      const from = openSync(src, 'r')
      const to = openSync(join(dir, 'raw-copy'), 'w')
      const buf = Buffer.allocUnsafe(1 << 20)
      for (let n; (n = readSync(from, buf, 0, buf.length, null)) > 0; ) writeSync(to, ...pass(buf.subarray(0, n)))
      fsyncSync(to)
      closeSync(from)
      closeSync(to)
      const ms = now() - s
      rmSync(join(dir, 'raw-copy'))
      return ms
    }
    // read + write + fsync of the same bytes
    const rawCopy = () => timedCopy((bytes) => [bytes, 0, bytes.length])
    // The floor of a migrate that checks what it seals (§16: a corrupt log is refused untouched):
    // the raw copy plus a JSON.parse and a crc32 of each line, the sealed lines written, no
    // seq, envelope or repair checks, no lock, no rename, in this process (no process start).
    const rawCheckedCopy = () => {
      const out = Buffer.allocUnsafe((1 << 20) * 2)
      let carry = Buffer.alloc(0)
      return timedCopy((bytes) => {
        const chunk = carry.length ? Buffer.concat([carry, bytes]) : bytes
        let o = 0
        let at = 0
        for (let nl; (nl = chunk.indexOf(10, at)) !== -1; at = nl + 1) {
          JSON.parse(chunk.toString('utf8', at, nl))
          const c = crc32(chunk.subarray(at, nl - 1))
          o += chunk.copy(out, o, at, nl - 1)
          o += out.write(`,"crc":"${c.toString(16).padStart(8, '0')}"}\n`, o, 'latin1')
        }
        carry = Buffer.from(chunk.subarray(at))
        return [out, 0, o]
      })
    }
    // The same checked copy with the parse and seal on `threads` worker threads (every core of
    // this machine), this thread reading 4 MiB at a time, handing each piece of whole lines to
    // the next worker and writing the sealed pieces back in order: the floor of a migrate that
    // checks on every core. Worker start-up included, as a migrate would pay it.
    const rawParallelCheckedCopy = async (threads) => {
      const { Worker } = await import('node:worker_threads')
      const source = `
        const { parentPort } = require('node:worker_threads')
        const { crc32 } = require('node:zlib')
        const HEX = Buffer.from('0123456789abcdef', 'latin1')
        parentPort.on('message', ({ id, bytes }) => {
          const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
          let lines = 0
          for (let at = b.indexOf(10); at !== -1; at = b.indexOf(10, at + 1)) lines++
          const out = Buffer.allocUnsafe(b.length + lines * 17)
          let o = 0
          for (let at = 0, nl; (nl = b.indexOf(10, at)) !== -1; at = nl + 1) {
            JSON.parse(b.toString('utf8', at, nl))
            const c = crc32(b.subarray(at, nl - 1))
            o += b.copy(out, o, at, nl - 1)
            o += out.write(',"crc":"', o, 'latin1')
            for (let k = 0; k < 8; k++) out[o + k] = HEX[(c >>> (28 - 4 * k)) & 15]
            o += 8
            out[o++] = 0x22
            out[o++] = 0x7d
            out[o++] = 0x0a
          }
          parentPort.postMessage({ id, out: out.subarray(0, o) }, [out.buffer])
        })`
      const s = now()
      const workers = Array.from({ length: threads }, () => new Worker(source, { eval: true }))
      const waiting = new Map()
      for (const w of workers) w.on('message', ({ id, out }) => waiting.get(id)(out))
      const from = openSync(src, 'r')
      const to = openSync(join(dir, 'raw-copy'), 'w')
      const inFlight = []
      let carry = Buffer.alloc(0)
      let id = 0
      const writeOldest = async () => {
        const out = await inFlight.shift()
        writeSync(to, out, 0, out.length)
      }
      for (;;) {
        const buf = Buffer.allocUnsafe(4 << 20)
        const n = readSync(from, buf, 0, buf.length, null)
        const chunk = carry.length ? Buffer.concat([carry, buf.subarray(0, n)]) : buf.subarray(0, n)
        const end = n === 0 ? chunk.length : chunk.lastIndexOf(10) + 1
        carry = Buffer.from(chunk.subarray(end))
        if (end > 0) {
          const bytes = new Uint8Array(end)
          bytes.set(chunk.subarray(0, end))
          const k = id++
          inFlight.push(new Promise((ok) => waiting.set(k, ok)))
          workers[k % threads].postMessage({ id: k, bytes }, [bytes.buffer])
        }
        while (inFlight.length > (n === 0 ? 0 : 2 * threads)) await writeOldest()
        if (n === 0) break
      }
      fsyncSync(to)
      closeSync(from)
      closeSync(to)
      await Promise.all(workers.map((w) => w.terminate()))
      const ms = now() - s
      rmSync(join(dir, 'raw-copy'))
      return ms
    }
    // The CLI migrates a copy of the source log in a child process, which reports its peak RSS.
    const REPORT_RSS = new URL('../probes/report-peak-rss.mjs', import.meta.url).href
    const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname
    const migrateOnce = () => {
      const root = join(dir, 'migrate-root')
      rmSync(root, { recursive: true, force: true })
      mkdirSync(join(root, '_no-cwd'), { recursive: true })
      copyFileSync(src, join(root, '_no-cwd', 'm.jsonl'))
      execFileSync('sync')
      const s = now()
      const r = spawnSync(process.execPath, ['--import', REPORT_RSS, cli, '--root', root, 'migrate', 'm'], { encoding: 'utf8' })
      const ms = now() - s
      if (r.status !== 0) throw new Error(`migrate failed: ${r.stderr}`)
      return { ms, rssKb: Number(/RSS (\d+)/.exec(r.stderr)?.[1]) }
    }
    const speed = []
    const vsChecked = []
    const floor = []
    const rss = []
    const parallelFloor = []
    const THREADS = Math.max(2, cpus().length)
    const ms = { raw: [], checked: [], parallel: [], migrate: [] }
    execFileSync('sync') // the source just written: the first raw copy must not pay for its writeback
    for (let r = 0; r < Math.max(5, Math.min(ROUNDS, 5)); r++) {
      const rawMs = rawCopy()
      const checkedMs = rawCheckedCopy()
      const parallelMs = await rawParallelCheckedCopy(THREADS)
      const m = migrateOnce()
      speed.push(rawMs / m.ms)
      vsChecked.push(checkedMs / m.ms)
      floor.push(rawMs / checkedMs)
      parallelFloor.push(rawMs / parallelMs)
      ms.parallel.push(parallelMs)
      rss.push(m.rssKb)
      ms.raw.push(rawMs)
      ms.checked.push(checkedMs)
      ms.migrate.push(m.ms)
    }
    console.log(`migrate of a ${(size / 2 ** 30).toFixed(2)} GiB log (${seq} events): speed vs raw read + write + fsync ${ratios(speed)} (target ≥ 0.8×); peak RSS of the migrating process ${(median(rss) / 1024).toFixed(0)} MiB (median)`)
    console.log(`  medians: raw copy ${median(ms.raw).toFixed(0)} ms, raw copy with a JSON.parse + crc32 of each line ${median(ms.checked).toFixed(0)} ms, migrate (CLI process) ${median(ms.migrate).toFixed(0)} ms`)
    console.log(`  the floor of a checking migrate: raw copy / raw checked copy ${ratios(floor)}; migrate vs the raw checked copy ${ratios(vsChecked)}`)
    console.log(`  on every core: raw copy / raw checked copy on ${THREADS} worker threads (${median(ms.parallel).toFixed(0)} ms) ${ratios(parallelFloor)}`)
    rmSync(src, { force: true })
  }
} finally {
  cleanup(dir)
}
