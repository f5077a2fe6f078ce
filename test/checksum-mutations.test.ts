// Every single-bit flip and every change of 1–4 consecutive bytes of a small version-1 log, at
// every position but its final newline, is refused with E_CORRUPT by `load`, the file untouched
// (docs/contract.md §16); a mutant holding a NUL byte is judged by the crash rule instead (§6,
// rule 3). The same mutations of the same log in version 0 are the documented baseline: how many
// a log without checksums loads as another history, or cuts.
//
// The family, exhaustive over positions and deterministic (no sampling):
// - `bit`: each of the 8 bits of every byte flipped;
// - `byte`: every byte replaced by each value of BYTE_VALUES other than itself and its bit flips:
//   the bytes JSON text and the checksum field are made of (`"` `\` `{` `}` `[` `]` `,` `:`,
//   whitespace and newlines, digits, `-` `.` `e`, hex digits in both cases, the first letters of
//   true/null/false, another letter), NUL, DEL and bytes that are never UTF-8 or start a
//   multi-byte sequence. `CHECKSUM_MUTATIONS=all` replaces it by all 255 other values (the long
//   form: about four times as many mutants, docs/reliability.md gives its figures);
// - `run2`…`run4`: every window of 2, 3 and 4 consecutive bytes changed by each pattern of
//   PATTERNS (every byte XOR 0xFF; every byte + 1; every byte replaced by one of `"` `\` `}`
//   `,` `0` `a` space newline, or by NUL; for 2 bytes, the pair swapped);
// - `burst32`: an error burst of exactly 32 bits starting at every bit, all 32 flipped (in the
//   long form also every other one, first and last flipped): unless byte-aligned it reaches
//   into a fifth byte.
// Why this covers what §16 promises: inside a line, every change confined to 32 consecutive bits
// — so every change of up to 4 consecutive bytes, whatever the values — is an error burst of at
// most 32 bits, and CRC-32 (a degree-32 generator with a non-zero constant term) detects every
// such burst: the last test checks that property directly with zlib's crc32 over every line of
// the log, for every start bit and length. What the mutants must then show is that the package
// applies the check to every line and every byte of it — the header, each event, the checksum
// field itself (its spelling, its hex digits: an upper-cased digit has the same value) and the
// newlines between lines (a change there merges or splits lines) — and that no value is read
// specially before the check: for one byte every value the reader's code can tell apart (or all
// of them in the long form); for windows the values that change JSON's structure, the largest
// change (XOR 0xFF), the smallest arithmetic one (+1 turns digits into other digits: another
// seq, turn or time) and NUL.
import { crc32 } from 'node:zlib'
import { isDeepStrictEqual } from 'node:util'
import { describe, expect, test } from 'vitest'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent, SessionMeta } from '../src/session/schema.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { expectedFileAfterLoad, expectLoad } from '../src/torture/log-oracle.js'

const ROOT = '/m'
const PATH = `${ROOT}/_no-cwd/m.jsonl`
const T = 1

const EVENTS: SessionEvent[] = [
  { seq: 0, type: 'turn/start', time: T, data: { turn: 1 } },
  { seq: 1, type: 'tool/call', time: T, data: { turn: 1, step: 0, callId: 'c1', name: 'ls', arguments: {} } },
  { seq: 2, type: 'tool/result', time: T, data: { turn: 1, step: 0, callId: 'c1', content: [{ type: 'text', text: 'a.ts' }] } },
  { seq: 3, type: 'turn/end', time: T, data: { turn: 1, reason: { kind: 'completed' } } },
]

/** The log as the package writes it in `version`: a header and one complete turn with a tool call. */
async function writtenLog(version: 0 | 1): Promise<Buffer> {
  const fs = createCrashFileSystem()
  const p = createJsonlPersistence({ root: ROOT, fs, formatVersion: version })
  await p.create({ id: 'm', createdAt: T, delegationDepth: 0 })
  await p.append('m', EVENTS)
  await p.closeAll()
  return readAll(fs)
}

type Fs = ReturnType<typeof createCrashFileSystem>

async function readAll(fs: Fs): Promise<Buffer> {
  const h = await fs.open(PATH, 'r')
  const { size } = await h.stat()
  const buf = Buffer.alloc(size)
  await h.read(buf, 0, size, 0)
  await h.close()
  return buf
}

interface Mutant {
  family: string
  at: number
  bytes: Buffer
}

const ALL = process.env.CHECKSUM_MUTATIONS === 'all'
const BYTE_VALUES = ALL
  ? Array.from({ length: 256 }, (_, v) => v)
  : [...'"\\{}[],: \n\r\t019-.eafAFtnx'].map((c) => c.charCodeAt(0)).concat([0x00, 0x7f, 0x80, 0xbf, 0xc3, 0xe2, 0xf0, 0xff])

const PATTERNS: [string, (b: number, i: number, window: Buffer) => number][] = [
  ['xor-ff', (b) => b ^ 0xff],
  ['plus-1', (b) => (b + 1) & 0xff],
  ...[...'"\\}, 0a\n'].map((c): [string, (b: number) => number] => [`all-${JSON.stringify(c)}`, () => c.charCodeAt(0)]),
  ['all-nul', () => 0],
]

/** The whole family for `log`, in a fixed order; mutants equal to the log are left out. */
function* mutants(log: Buffer): Generator<Mutant> {
  const last = log.length - 1 // the final newline, which a crash may cut: not mutated
  for (let at = 0; at < last; at++) {
    for (let bit = 0; bit < 8; bit++) {
      const m = Buffer.from(log)
      m[at] = m[at]! ^ (1 << bit)
      yield { family: 'bit', at, bytes: m }
    }
    for (const v of BYTE_VALUES) {
      const d = v ^ log[at]!
      if (d === 0 || (d & (d - 1)) === 0) continue // the byte itself, or a bit flip
      const m = Buffer.from(log)
      m[at] = v
      yield { family: 'byte', at, bytes: m }
    }
    for (let k = 2; k <= 4; k++) {
      if (at + k > last) continue
      const window = log.subarray(at, at + k)
      const changes = PATTERNS.map(([, f]) => Buffer.from(window.map((b, i) => f(b, i, window))))
      if (k === 2) changes.push(Buffer.from([window[1]!, window[0]!]))
      for (const change of changes) {
        if (change.equals(window)) continue
        const m = Buffer.from(log)
        change.copy(m, at)
        yield { family: `run${k}`, at, bytes: m }
      }
    }
  }
  for (let bit = 0; bit + 32 <= last * 8; bit++) {
    for (const every of ALL ? [1, 2] : [1]) {
      const m = Buffer.from(log)
      for (let b = 0; b < 32; b += every) m[(bit + b) >> 3] = m[(bit + b) >> 3]! ^ (0x80 >> ((bit + b) & 7))
      if (every === 2) m[(bit + 31) >> 3] = m[(bit + 31) >> 3]! ^ (0x80 >> ((bit + 31) & 7))
      yield { family: 'burst32', at: bit >> 3, bytes: m }
    }
  }
}

type Outcome =
  | { refused: string; line?: number; byteOffset?: number; untouched: boolean }
  | { refused?: undefined; events: readonly SessionEvent[]; meta: SessionMeta; cut: boolean; after: Buffer }

/** Loads each mutant from a crash-modelled file system in memory (one instance, the file rewritten). */
async function loader() {
  const fs = createCrashFileSystem()
  await fs.mkdir(ROOT, 0o700)
  await fs.mkdir(`${ROOT}/_no-cwd`, 0o700)
  await (await fs.open(PATH, 'wx', 0o600)).close()
  const p = createJsonlPersistence({ root: ROOT, fs })
  return async (bytes: Buffer): Promise<Outcome> => {
    const h = await fs.open(PATH, 'r+')
    await h.truncate(0)
    await h.write(bytes, 0, bytes.length, 0)
    await h.close()
    try {
      const loaded = await p.load('m')
      await p.close('m')
      return { events: loaded.events, meta: loaded.meta, cut: loaded.repair?.truncatedAtByte !== undefined, after: await readAll(fs) }
    } catch (err) {
      if (!isSessionPersistenceError(err)) throw err
      const untouched = (await readAll(fs)).equals(bytes)
      if (err instanceof SessionPersistenceCorruptionError) return { refused: err.code, line: err.line, byteOffset: err.byteOffset, untouched }
      return { refused: err.code, untouched }
    }
  }
}

interface Tally {
  mutants: number
  /** Mutants holding a NUL byte, judged by the crash rule. */
  nul: number
  refused: number
  /** Loaded as another history (other events or another header), nothing cut. */
  acceptedChanged: number
  /** Loaded as the same history: the mutation changed nothing a reader sees. */
  acceptedSame: number
  /** Cut as a torn tail (history dropped), without a NUL byte. */
  cut: number
  /** NUL mutants cut at a line start, the kept events a prefix of the original's. */
  nulCut: number
  nulRefused: number
}

const tally = (): Tally => ({ mutants: 0, nul: 0, refused: 0, acceptedChanged: 0, acceptedSame: 0, cut: 0, nulCut: 0, nulRefused: 0 })

/**
 * Loads every mutant of `log` and compares with the oracle (log-oracle.ts, written from the
 * contract apart from the scanner): the package must do exactly what the bytes say. Returns the
 * tallies per family and the problems found (the first 20).
 */
async function runFamily(log: Buffer, version: 0 | 1) {
  const load = await loader()
  const original = await load(log)
  if (original.refused !== undefined || original.cut) throw new Error('the unmutated log does not load')
  const byFamily: Record<string, Tally> = {}
  const problems: string[] = []
  const problem = (m: Mutant, what: string) => {
    if (problems.length < 20) problems.push(`${m.family} at byte ${m.at} (${JSON.stringify(m.bytes.subarray(Math.max(0, m.at - 8), m.at + 12).toString('latin1'))}): ${what}`)
  }
  for (const m of mutants(log)) {
    const t = (byFamily[m.family] ??= tally())
    t.mutants++
    const hasNul = m.bytes.includes(0)
    if (hasNul) t.nul++
    const got = await load(m.bytes)
    const want = expectLoad(m.bytes, 'm')
    if (got.refused !== undefined) {
      if (!got.untouched) problem(m, `refused with ${got.refused} but the file was modified`)
      const where = want.refuse === 'E_CORRUPT' && (want.line !== got.line || want.byteOffset !== got.byteOffset)
      if (want.refuse !== got.refused || where) {
        problem(m, `refused with ${got.refused} at line ${got.line} byte ${got.byteOffset}; the oracle says ${JSON.stringify(want)}`)
      }
      if (hasNul) t.nulRefused++
      else t.refused++
    } else {
      if (want.refuse !== undefined) problem(m, `loaded ${got.events.length} events (cut: ${got.cut}); the oracle says ${want.refuse} at line ${want.line}`)
      else {
        if (!isDeepStrictEqual(got.events, [...want.kept, ...want.closers])) problem(m, 'loaded other events than the oracle reads')
        if (!got.after.equals(expectedFileAfterLoad(m.bytes, want))) problem(m, 'left other bytes than the oracle expects')
      }
      if (hasNul) {
        t.nulCut++
        // The crash rule: cut at the start of a line of the original, keeping a prefix of its events.
        const cutAt = want.refuse === undefined ? want.cutAt : undefined
        if (cutAt === undefined || !m.bytes.subarray(0, cutAt).equals(log.subarray(0, cutAt)) || (cutAt > 0 && log[cutAt - 1] !== 0x0a)) {
          problem(m, `a NUL mutant was not cut at a line start of the original (cut at ${String(cutAt)})`)
        }
        if (want.refuse === undefined && !isDeepStrictEqual(want.kept, EVENTS.slice(0, want.kept.length))) problem(m, 'a NUL mutant kept events that are not a prefix of the original')
      } else if (got.cut) t.cut++
      else if (isDeepStrictEqual(got.events, original.events) && isDeepStrictEqual(got.meta, original.meta)) t.acceptedSame++
      else t.acceptedChanged++
    }
    if (version === 1 && !hasNul && got.refused !== 'E_CORRUPT') problem(m, `version 1: ${got.refused ?? (got.cut ? 'cut as a torn tail' : 'loaded')}, not E_CORRUPT`)
  }
  const total = Object.values(byFamily).reduce((a, t) => {
    for (const k of Object.keys(t) as (keyof Tally)[]) a[k] += t[k]
    return a
  }, tally())
  return { byFamily, total, problems }
}

const table = (title: string, byFamily: Record<string, Tally>, total: Tally) =>
  [title, ...Object.entries({ ...byFamily, total }).map(([f, t]) => `  ${f.padEnd(8)} ${JSON.stringify(t)}`)].join('\n')

describe('a version-1 log refuses every small change (docs/contract.md §16)', () => {
  test('every bit flip and every change of 1–4 consecutive bytes but the final newline is E_CORRUPT, the file untouched; NUL mutants follow the crash rule', async () => {
    const log = await writtenLog(1)
    expect(log.length).toBeGreaterThan(300)
    expect(log.length).toBeLessThan(700)
    const t0 = performance.now()
    const { byFamily, total, problems } = await runFamily(log, 1)
    console.log(`${table(`version 1, ${log.length}-byte log (${((performance.now() - t0) / 1000).toFixed(1)} s):`, byFamily, total)}`)
    expect(problems).toEqual([])
    expect(total.acceptedChanged + total.acceptedSame + total.cut).toBe(0)
    expect(total.refused).toBe(total.mutants - total.nul)
    expect(byFamily.bit!.mutants).toBe(8 * (log.length - 1))
    if (ALL) expect(byFamily.byte!.mutants).toBe(247 * (log.length - 1))
  }, 300_000)
})

// The baseline, counted once and pinned (so that a change in the reader or in the family shows):
// per family, [mutants, of which holding a NUL byte, refused, loaded as another history, cut as
// a torn tail] — the last two without a NUL byte are the silent ones.
const V0_BASELINE: Record<string, [number, number, number, number, number]> = ALL
  ? {
      bit: [3552, 0, 2080, 1096, 376],
      byte: [109668, 444, 78857, 13096, 17271],
      run2: [5298, 443, 3221, 977, 657],
      run3: [4860, 442, 3149, 583, 686],
      run4: [4851, 441, 3218, 469, 723],
      burst32: [7042, 4, 5615, 93, 1330],
    }
  : {
      bit: [3552, 0, 2080, 1096, 376],
      byte: [13744, 444, 8644, 2923, 1733],
      run2: [5298, 443, 3221, 977, 657],
      run3: [4860, 442, 3149, 583, 686],
      run4: [4851, 441, 3218, 469, 723],
      burst32: [3521, 0, 2841, 0, 680],
    }

describe('the same mutations of the same log in version 0: the baseline', () => {
  test('counts of mutants a log without checksums loads as another history or cuts', async () => {
    const log = await writtenLog(0)
    const t0 = performance.now()
    const { byFamily, total, problems } = await runFamily(log, 0)
    const silent = total.acceptedChanged + total.cut
    console.log(`${table(`version 0, ${log.length}-byte log (${((performance.now() - t0) / 1000).toFixed(1)} s):`, byFamily, total)}`)
    console.log(`version 0: ${silent} of ${total.mutants - total.nul} mutants without a NUL byte silent (${total.acceptedChanged} loaded as another history, ${total.cut} cut as a torn tail)`)
    expect(problems).toEqual([])
    expect(total.acceptedSame).toBe(0)
    const counted = Object.fromEntries(Object.entries(byFamily).map(([f, t]) => [f, [t.mutants, t.nul, t.refused, t.acceptedChanged, t.cut]]))
    expect(counted).toEqual(V0_BASELINE)
  }, 300_000)
})

describe('CRC-32 detects every error burst of up to 32 bits', () => {
  test('over every line of the log (its bytes before the checksum field): every start bit, every length 1–32, three fillings', async () => {
    const log = await writtenLog(1)
    let bursts = 0
    let start = 0
    while (start < log.length) {
      const nl = log.indexOf(0x0a, start)
      const p = log.subarray(start, nl - 18) // the bytes the checksum covers (§16)
      const good = crc32(p)
      for (let bit = 0; bit < p.length * 8; bit++) {
        for (let length = 1; length <= 32 && bit + length <= p.length * 8; length++) {
          for (const fill of [0xffffffff, 0xaaaaaaaa, 0x5bd1e995]) {
            const m = Buffer.from(p)
            for (let b = 0; b < length; b++) {
              if (b === 0 || b === length - 1 || (fill >>> (b & 31)) & 1) m[(bit + b) >> 3] = m[(bit + b) >> 3]! ^ (0x80 >> ((bit + b) & 7))
            }
            bursts++
            if (crc32(m) === good) throw new Error(`undetected burst: line at byte ${start}, bit ${bit}, length ${length}`)
          }
        }
      }
      start = nl + 1
    }
    console.log(`CRC-32: ${bursts} error bursts of 1–32 bits over the ${EVENTS.length + 1} lines, every one detected`)
    expect(bursts).toBeGreaterThan(100_000)
  })
})
