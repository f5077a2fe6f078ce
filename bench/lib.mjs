// Shared helpers of the benchmark scripts: timing, statistics, event generation, scratch space.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const now = () => Number(process.hrtime.bigint()) / 1e6 // ms

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

export function stats(xs) {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), runs: xs.length }
}

/**
 * This process's peak RSS, in bytes. On Linux `VmHWM`, the high-water mark of its own address
 * space; `process.resourceUsage().maxRSS` (getrusage) is not used there, because a spawned child
 * inherits its parent's high-water mark through fork + exec (a parent at 600 MiB made a child
 * that peaked at 39 MiB report 604 MiB). Elsewhere getrusage, with that caveat.
 */
export function peakRssBytes() {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]
    if (kb !== undefined) return Number(kb) * 1024
  } catch {
    // not Linux
  }
  return process.resourceUsage().maxRSS * 1024
}

/** A scratch directory on the same file system as the test runs (never tmpfs unless TMPDIR says so). */
export function scratch(name) {
  const base = process.env.BENCH_DIR ?? join(process.cwd(), 'bench', '.work')
  mkdirSync(base, { recursive: true })
  return mkdtempSync(join(base, `${name}-`))
}

export function cleanup(dir) {
  rmSync(dir, { recursive: true, force: true })
}

const TEXT = 'The quick brown fox jumps over the lazy dog while the agent streams its answer. '.repeat(5).slice(0, 300)

/** An event of about 400 bytes once serialized, like a streamed chunk. */
export function event(seq, turn = 1) {
  return { seq, type: 'assistant/chunk', time: 1_764_489_600_000 + seq, data: { turn, step: 0, chunk: { type: 'text-delta', text: TEXT } } }
}

/** `count` events of ~400 bytes, seqs from `from`. */
export function events(from, count) {
  const out = []
  for (let i = 0; i < count; i++) out.push(event(from + i))
  return out
}

export const serialize = (batch) => Buffer.from(batch.map((e) => `${JSON.stringify(e)}\n`).join(''))

/** Promise around one callback-API call: Node's cheapest non-blocking file calls. */
export const callback = (start) => new Promise((resolve, reject) => start((err, value) => (err ? reject(err) : resolve(value))))

/**
 * Times `contenders` ([name, run(i)] pairs) over rounds 1..count, interleaved: every round runs
 * each contender once, starting with a different one each round (what ran just before, a
 * blocking sync or an idle pool, shifts the next one's time). Returns each name's total ms, and,
 * with `perRound`, each name's list of round times.
 */
export async function interleave(contenders, count, { perRound = false } = {}) {
  const total = Object.fromEntries(contenders.map(([name]) => [name, 0]))
  const rounds = Object.fromEntries(contenders.map(([name]) => [name, []]))
  for (let i = 1; i <= count; i++) {
    for (let k = 0; k < contenders.length; k++) {
      const [name, run] = contenders[(i + k) % contenders.length]
      const t = now()
      await run(i)
      const ms = now() - t
      total[name] += ms
      if (perRound) rounds[name].push(ms)
    }
  }
  return perRound ? { total, rounds } : total
}
