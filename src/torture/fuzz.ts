import { crc32 } from 'node:zlib'
import { isDeepStrictEqual } from 'node:util'
import type { SessionEvent } from '../session/schema.js'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import type { JsonlSessionPersistence, LoadedSession } from '../persistence.js'
import { createCrashFileSystem } from '../testing/crash-fs.js'
import { expectLoad, expectedFileAfterLoad, lineOf, sealBytes, type OracleVerdict } from './log-oracle.js'
import { seededRandom } from './random.js'

export interface FuzzReport {
  /** The format version of the logs mutated (§16). */
  version: 0 | 1
  cases: number
  /** Loaded: the original's events up to some point, plus the exact closers. */
  repairedOrIntact: number
  /** Refused with E_CORRUPT or E_FORMAT_UNSUPPORTED, the file byte-for-byte unchanged. */
  refused: number
  /** The mutation left a valid line with another content: format v0 has no checksums to see it. */
  undetectable: number
  /**
   * Of those, the mutants of a version-1 log whose header was rewritten as a valid version-0
   * header: a version-0 log whose lines carry a `crc` field, which no checksum can tell from one.
   */
  undetectableAsV0: number
  /** Every mutant on which the backend and the oracle disagree. */
  failed: number
  /**
   * Of those, the silent ones: the backend returned (or cut) history the oracle refuses,
   * returned other events than the bytes hold, or left other bytes on disk.
   */
  silent: number
  /** The first 20 disagreements, named by their mutation. */
  failures: string[]
  /** The mutants of those 20, to replay. */
  failingMutants: Buffer[]
  byMutation: Record<string, number>
}

const ROOT = '/fuzz'
const DIR = `${ROOT}/_no-cwd`
const PATH = `${DIR}/f.jsonl`
const T0 = 1_764_489_600_000

type Rand = () => number
type Version = 0 | 1

function baseLogs(version: Version): { events: SessionEvent[]; bytes: Buffer }[] {
  const mk = (events: Omit<SessionEvent, 'seq' | 'time'>[]) => events.map((e, i) => ({ seq: i, time: T0 + i, ...e }) as SessionEvent)
  const turn = (n: number): Omit<SessionEvent, 'seq' | 'time'>[] => [
    { type: 'turn/start', data: { turn: n } },
    { type: 'user/message', data: { content: `Prüfe die Datei ${n} — «ok» 🦀` } },
    { type: 'assistant/chunk', data: { turn: n, step: 0, chunk: { text: 'Looking…' } } },
    { type: 'assistant/message', data: { turn: n, step: 0, content: [{ type: 'text', text: 'Done.' }, { type: 'tool-call', callId: `c${n}`, name: 'read', arguments: { path: 'a.ts' } }] } },
    { type: 'tool/result', data: { turn: n, step: 0, callId: `c${n}`, content: [{ type: 'text', text: 'x'.repeat(200) }] } },
    { type: 'turn/end', data: { turn: n, reason: { kind: 'completed' } } },
  ]
  const logs = [
    mk([...turn(1), ...turn(2), ...turn(3)]),
    mk([...turn(1), ...turn(2).slice(0, 4)]), // open turn with a pending call
    mk([{ type: 'vendor/x', data: { a: [1, 2, 3] }, ignorable: true }, ...turn(1)]),
  ]
  // Written from §3.3 and §16 by the oracle's own writer, not the package's.
  const header = { type: 'session', version, id: 'f', createdAt: T0, delegationDepth: 0 }
  return logs.map((events) => ({ events, bytes: Buffer.from(lineOf(header, version) + events.map((e) => lineOf(e, version)).join('')) }))
}

function lineStarts(bytes: Buffer): number[] {
  const starts = [0]
  for (let i = 0; i < bytes.length - 1; i++) if (bytes[i] === 0x0a) starts.push(i + 1)
  return starts
}

const GENERIC = ['truncate-tail', 'flip-byte', 'nul-range', 'invalid-utf8', 'duplicate-line', 'swap-lines', 'delete-line', 'blank-line', 'garbage-tail', 'damage-header', 'change-bytes']
// Version 1: bursts a CRC-32 always detects, lines sealed correctly but otherwise damaged, lines
// without their checksum or with a misspelt one, and sealed garbage after the end.
const SEALED = ['burst', 'resealed-defect', 'unsealed-line', 'crc-spelling', 'sealed-garbage-tail']

/** The object a line holds without its checksum field, or undefined when it holds none (an earlier mutation). */
function objectOf(line: Buffer): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(line.toString('utf8'))
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined
    const { crc: _crc, ...rest } = v as Record<string, unknown>
    return rest
  } catch {
    return undefined
  }
}

/** JSON text with a byte 0xff (never UTF-8) at the start of its `type` string. */
function notUtf8(json: string): Buffer {
  const bytes = Buffer.from(json)
  const at = bytes.indexOf('"type":"') + 8
  return Buffer.concat([bytes.subarray(0, at), Buffer.from([0xff]), bytes.subarray(at)])
}

const sealed = (value: unknown) => Buffer.concat([sealBytes(Buffer.from(JSON.stringify(value))), Buffer.from('\n')])

/** One mutant of `bytes` (a log of `version`), and the name of the mutation. */
function mutate(bytes: Buffer, version: Version, rand: Rand, forced?: string): { name: string; mutant: Buffer; asV0?: boolean } {
  const int = (n: number) => Math.floor(rand() * n)
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!
  const starts = lineStarts(bytes)
  const lines = starts.map((s, i) => bytes.subarray(s, starts[i + 1] ?? bytes.length))
  const kinds = version === 1 ? [...GENERIC, ...SEALED] : GENERIC
  const name = forced ?? pick([...kinds, 'two-mutations'])
  const eventLine = () => 1 + int(lines.length - 1)
  const replaceLine = (i: number, by: Buffer) => Buffer.concat([...lines.slice(0, i), by, ...lines.slice(i + 1)])
  switch (name) {
    case 'two-mutations': {
      // Two defects in one log: the rules for the first defect and the commit boundary meet.
      const once = mutate(bytes, version, rand, pick(kinds))
      if (lineStarts(once.mutant).length < 3) return { ...once, name }
      const twice = mutate(once.mutant, version, rand, pick(kinds))
      return { name, mutant: twice.mutant, asV0: once.asV0 === true || twice.asV0 === true }
    }
    case 'truncate-tail': {
      const from = starts[Math.max(1, starts.length - 3)] ?? 0
      return { name, mutant: bytes.subarray(0, from + int(bytes.length - from)) }
    }
    case 'flip-byte': {
      const m = Buffer.from(bytes)
      const at = int(m.length)
      m[at] = m[at]! ^ (1 << int(8))
      return { name, mutant: m }
    }
    case 'change-bytes': {
      // 1 to 4 consecutive bytes, each replaced by another value (a burst of at most 32 bits).
      const m = Buffer.from(bytes)
      const at = int(m.length)
      for (let k = 1 + int(4), i = at; k > 0 && i < m.length; k--, i++) m[i] = m[i]! ^ (1 + int(255))
      return { name, mutant: m }
    }
    case 'burst': {
      // An error burst of 1 to 32 bits: its first and last bits flipped, those between at random.
      const m = Buffer.from(bytes)
      const length = 1 + int(32)
      const first = int(m.length * 8 - length + 1)
      for (let b = 0; b < length; b++) {
        if (b === 0 || b === length - 1 || rand() < 0.5) m[(first + b) >> 3] = m[(first + b) >> 3]! ^ (0x80 >> ((first + b) & 7))
      }
      return { name, mutant: m }
    }
    case 'nul-range': {
      const m = Buffer.from(bytes)
      const at = rand() < 0.5 ? int(m.length) : Math.floor(int(m.length) / 4096) * 4096
      m.fill(0, at, Math.min(m.length, at + 1 + int(4096)))
      return { name, mutant: m }
    }
    case 'invalid-utf8': {
      const at = int(bytes.length)
      return { name, mutant: Buffer.concat([bytes.subarray(0, at), Buffer.from([pick([0xff, 0xc3, 0xe2, 0x80])]), bytes.subarray(at)]) }
    }
    case 'duplicate-line': {
      const i = eventLine()
      return { name, mutant: Buffer.concat([...lines.slice(0, i + 1), lines[i]!, ...lines.slice(i + 1)]) }
    }
    case 'swap-lines': {
      const i = 1 + int(Math.max(1, lines.length - 2))
      const swapped = [...lines]
      ;[swapped[i], swapped[i + 1]] = [swapped[i + 1]!, swapped[i]!]
      return { name, mutant: Buffer.concat(swapped.filter(Boolean) as Buffer[]) }
    }
    case 'delete-line': {
      const i = eventLine()
      return { name, mutant: Buffer.concat([...lines.slice(0, i), ...lines.slice(i + 1)]) }
    }
    case 'blank-line': {
      const i = 1 + int(lines.length)
      return { name, mutant: Buffer.concat([...lines.slice(0, i), Buffer.from('\n'), ...lines.slice(i)]) }
    }
    case 'garbage-tail':
      return { name, mutant: Buffer.concat([bytes, Buffer.from(pick(['{"seq":', '\u0000\u0000', '}}}\n', 'null\n', '{"type":"turn/end"']))]) }
    case 'damage-header': {
      const text = lines[0]!.toString('utf8')
      const h = objectOf(lines[0]!)
      if (!h) return mutate(bytes, version, rand, 'flip-byte')
      const { delegationDepth: _d, ...noDepth } = h
      const variants =
        version === 0
          ? [
              text.replace('"version":0', '"version":1'), // version 1 without a checksum
              text.replace('"version":0', '"version":2'),
              text.replace(',"delegationDepth":0', ''),
              text.replace('"id":"f"', '"id":"g"'),
              text.slice(0, int(text.length)),
              text.replace('"type":"session"', '"type":"sessiom"'),
              sealed({ ...h, version: 1 }).toString('utf8'), // a sealed header over v0 lines
            ]
          : [
              text.replace('"version":1', '"version":0'), // a flipped version digit: the checksum sees it
              text.replace('"version":1', '"version":2'),
              sealed({ ...h, version: 2 }).toString('utf8'), // a newer format, sealed
              sealed(noDepth).toString('utf8'),
              sealed({ ...h, id: 'g' }).toString('utf8'),
              sealed({ ...h, type: 'sessiom' }).toString('utf8'),
              lineOf(h, 0), // version 1 without its checksum
              text.slice(0, int(text.length)),
            ]
      // A version-1 log whose header is rewritten as a valid version-0 one is a version-0 log of
      // lines that carry a `crc` field: no checksum can see that (counted as undetectable).
      if (version === 1 && rand() < 0.15) {
        const v0 = pick([sealed({ ...h, version: 0 }), Buffer.from(lineOf({ ...h, version: 0 }, 0))])
        return { name, mutant: Buffer.concat([v0, ...lines.slice(1)]), asV0: true }
      }
      return { name, mutant: Buffer.concat([Buffer.from(pick(variants)), ...lines.slice(1)]) }
    }
    case 'resealed-defect': {
      // A line sealed correctly over an invalid event: the rules of §6 decide, not the checksum.
      const i = eventLine()
      const e = objectOf(lines[i]!)
      if (!e) return mutate(bytes, version, rand, 'flip-byte')
      const { seq: _s, ...noSeq } = e
      const variants: Buffer[] = [
        sealed({ ...e, seq: (e.seq as number) + 1 }),
        sealed(noSeq),
        sealed({ ...e, seq: String(e.seq) }),
        sealed({ ...e, type: '' }),
        sealed({ ...e, time: 'now' }),
        sealed({ ...e, ignorable: false }),
        sealed({ ...e, seq: (e.seq as number) + 1, type: 'turn/end' }), // a defect that is a commit boundary
        sealed({}), // '{,"crc":…}': not JSON
        // Bytes that are not UTF-8, sealed as they are.
        Buffer.concat([sealBytes(notUtf8(JSON.stringify(e))), Buffer.from('\n')]),
      ]
      return { name, mutant: replaceLine(i, pick(variants)) }
    }
    case 'unsealed-line': {
      const i = int(lines.length)
      const value = objectOf(lines[i]!)
      if (!value) return mutate(bytes, version, rand, 'flip-byte')
      return { name, mutant: replaceLine(i, Buffer.from(lineOf(value, 0))) }
    }
    case 'crc-spelling': {
      const i = int(lines.length)
      const value = objectOf(lines[i]!)
      if (!value) return mutate(bytes, version, rand, 'flip-byte')
      const json = JSON.stringify(value)
      const p = json.slice(0, -1)
      const h = crc32(Buffer.from(p)).toString(16).padStart(8, '0')
      const variants = [
        `${p},"crc":"${h.toUpperCase()}"}`,
        `{"crc":"${h}",${json.slice(1)}`,
        `${p},"crc":${crc32(Buffer.from(p))}}`,
        `${p},"crc":"${h.slice(1)}"}`,
        `${p}, "crc":"${h}"}`,
        `${p},"crc":"${h}" }`,
        `${p},"crc":"${crc32(Buffer.from(json)).toString(16).padStart(8, '0')}"}`, // over the whole JSON
        `${p},"crc":"${(crc32(Buffer.from(p)) ^ 1).toString(16).padStart(8, '0')}"}`,
      ]
      return { name, mutant: replaceLine(i, Buffer.from(`${pick(variants)}\n`)) }
    }
    case 'sealed-garbage-tail': {
      const seq = lines.length - 1
      const next = { seq, type: 'note', time: T0 + seq }
      const withNul = sealed(next)
      withNul.fill(0, 3, 3 + 1 + int(8))
      const variants = [
        sealed({ type: 'turn/end' }),
        sealed({ seq }),
        sealed(next).subarray(0, -3), // torn inside its checksum field
        Buffer.from(lineOf(next, 0)), // a complete line without its checksum
        withNul,
        Buffer.concat([withNul, Buffer.from(lineOf(next, 0))]), // damage after a crash's NUL bytes
      ]
      return { name, mutant: Buffer.concat([bytes, pick(variants)]) }
    }
    case 'huge-line': {
      const i = lines.length - 1
      const huge = Buffer.alloc(100 * 1024 * 1024 + 1, 0x78)
      huge[huge.length - 1] = 0x0a
      const line = version === 1 ? Buffer.concat([sealBytes(Buffer.concat([huge.subarray(0, -2), Buffer.from('}')])), Buffer.from('\n')]) : huge
      return { name, mutant: Buffer.concat([...lines.slice(0, i), line, ...lines.slice(i)]) }
    }
  }
  throw new Error(`unknown mutation ${name}`)
}

async function fsWith(bytes: Buffer) {
  const fs = createCrashFileSystem()
  await fs.mkdir(ROOT, 0o700)
  await fs.mkdir(DIR, 0o700)
  const h = await fs.open(PATH, 'wx', 0o600)
  await h.write(bytes, 0, bytes.length, 0)
  await h.close()
  return fs
}

async function readAll(fs: Awaited<ReturnType<typeof fsWith>>): Promise<Buffer> {
  const h = await fs.open(PATH, 'r')
  const { size } = await h.stat()
  const buf = Buffer.alloc(size)
  await h.read(buf, 0, size, 0)
  await h.close()
  return buf
}

/** Stands in for the backend under test (the proofs of the fuzzer itself wrap it in a liar). */
export type Wrap = (p: JsonlSessionPersistence) => JsonlSessionPersistence

const sameEvents = (a: readonly SessionEvent[], b: readonly SessionEvent[]) => isDeepStrictEqual(a, b)

/** What a repair report must say for a verdict that loads (undefined: no report at all). */
function expectedReport(v: Exclude<OracleVerdict, { refuse: string }>, persisted: boolean) {
  if (v.cutAt === undefined && v.closers.length === 0) return undefined
  return {
    persisted,
    ...(v.cutAt === undefined ? {} : { truncatedAtByte: v.cutAt }),
    droppedBytes: v.droppedBytes,
    droppedLines: v.droppedLines,
    droppedTurnEnds: v.droppedTurnEnds,
    closers: v.closers,
  }
}

function reportProblem(got: LoadedSession['repair'], want: ReturnType<typeof expectedReport>): string | undefined {
  if (want === undefined) return got === undefined ? undefined : `a repair was reported where the bytes need none: ${JSON.stringify(got)}`
  if (got === undefined) return `no repair reported, expected ${JSON.stringify({ ...want, closers: want.closers.length })}`
  const { reason: _reason, ...rest } = got
  return isDeepStrictEqual(rest, want) ? undefined : `repair report ${JSON.stringify({ ...rest, closers: rest.closers.length })}, expected ${JSON.stringify({ ...want, closers: want.closers.length })}`
}

type Outcome = 'ok' | 'refused' | 'undetectable' | { problem: string; silent: boolean }
const loud = (problem: string): Outcome => ({ problem, silent: false })
const silent = (problem: string): Outcome => ({ problem, silent: true })

/**
 * Checks one mutant against what its own bytes say (log-oracle.ts): `inspect` and `load` must
 * keep exactly the valid prefix the oracle reads, with exactly the closers the oracle computes,
 * cut exactly where it says and leave exactly the bytes it expects — or refuse with the code,
 * line and byte it names, the file untouched. The backend is configured to write new logs in
 * `newLogs`: a log keeps its own version, so its closers are written in the version of its
 * header whatever that says. Returns the outcome or a failure.
 */
async function checkMutant(original: SessionEvent[], mutant: Buffer, wrap: Wrap, newLogs: Version): Promise<Outcome> {
  const verdict = expectLoad(mutant, 'f')
  const fs = await fsWith(mutant)
  const p = wrap(createJsonlPersistence({ root: ROOT, fs, formatVersion: newLogs }))
  const refusal = (err: unknown, what: string): string | undefined => {
    if (!isSessionPersistenceError(err)) return `${what} threw a foreign error: ${String(err)}`
    if (!verdict.refuse) return `${what} refused (${err.code}: ${err.message}) a log whose bytes hold a loadable prefix`
    if (err.code !== verdict.refuse) return `${what} refused with ${err.code}, the bytes say ${verdict.refuse}`
    if (err instanceof SessionPersistenceCorruptionError && (err.line !== verdict.line || err.byteOffset !== verdict.byteOffset)) {
      return `${what} refused at line ${err.line} byte ${err.byteOffset}, the bytes say line ${verdict.line} byte ${verdict.byteOffset}`
    }
    return undefined
  }
  try {
    let inspected: LoadedSession | undefined
    try {
      inspected = await p.inspect('f')
    } catch (err) {
      const problem = refusal(err, 'inspect')
      if (problem) return loud(problem)
    }
    if (inspected && verdict.refuse) return silent(`inspect accepted a log the bytes say is ${verdict.refuse} at line ${verdict.line}`)
    let loaded: LoadedSession
    try {
      loaded = await p.load('f')
    } catch (err) {
      const problem = refusal(err, 'load')
      if (problem) return loud(problem)
      if (!(await readAll(fs)).equals(mutant)) return silent('a refused log was modified')
      return 'refused'
    }
    if (verdict.refuse) return silent(`load accepted a log the bytes say is ${verdict.refuse} at line ${verdict.line}`)
    const want = [...verdict.kept, ...verdict.closers]
    if (!inspected || !sameEvents(inspected.events, want)) return silent('inspect returned other events than the bytes hold')
    const inspectProblem = reportProblem(inspected.repair, expectedReport(verdict, false))
    if (inspectProblem) return loud(`inspect: ${inspectProblem}`)
    if (!sameEvents(loaded.events, want)) {
      const at = loaded.events.findIndex((e, i) => !isDeepStrictEqual(e, want[i]))
      return silent(`load returned ${loaded.events.length} events, the bytes hold ${verdict.kept.length} plus ${verdict.closers.length} closers (first difference at ${at})`)
    }
    const loadProblem = reportProblem(loaded.repair, expectedReport(verdict, true))
    if (loadProblem) return loud(`load: ${loadProblem}`)
    if (!(await readAll(fs)).equals(expectedFileAfterLoad(mutant, verdict))) return silent('the repaired file holds other bytes than the kept prefix plus the closers')
    await p.close('f')
    const again = await p.load('f')
    if (again.repair !== undefined || !sameEvents(again.events, loaded.events)) return silent('a second load changed something')
    // Counted, not failed: a mutation that leaves valid lines with other content is invisible
    // to format v0, which has no checksums.
    return sameEvents(verdict.kept, original.slice(0, verdict.kept.length)) && verdict.kept.length <= original.length ? 'ok' : 'undetectable'
  } finally {
    await p.closeAll()
  }
}

/**
 * Mutates valid logs of format `version` (default 0) `cases` times (every offset of the last
 * records truncated first, then random flips, byte changes, NULs, invalid UTF-8, duplicated,
 * swapped, deleted and blank lines, garbage tails, damaged headers; in version 1 also error
 * bursts of up to 32 bits, lines sealed correctly over invalid events, lines without their
 * checksum or with a misspelt one, sealed garbage after the end; and — when `hugeLine` — one
 * 100 MB line) and checks every mutant.
 */
export async function runFuzz(options: {
  cases: number
  seed?: number
  hugeLine?: boolean
  wrap?: Wrap
  version?: Version
  /** Called with every mutant that is not plainly loaded or refused (to replay one). */
  onFinding?: (finding: { name: string; mutant: Buffer; outcome: string }) => void
}): Promise<FuzzReport> {
  const wrap = options.wrap ?? ((p) => p)
  const version = options.version ?? 0
  const rand: Rand = seededRandom(options.seed ?? 7)
  const bases = baseLogs(version)
  const report: FuzzReport = { version, cases: 0, repairedOrIntact: 0, refused: 0, undetectable: 0, undetectableAsV0: 0, failed: 0, silent: 0, failures: [], failingMutants: [], byMutation: {} }
  const record = async (name: string, original: SessionEvent[], mutant: Buffer, asV0 = false) => {
    const outcome = await checkMutant(original, mutant, wrap, rand() < 0.5 ? 0 : 1)
    if (outcome !== 'ok' && outcome !== 'refused') {
      options.onFinding?.({ name, mutant, outcome: typeof outcome === 'string' ? outcome : `${outcome.silent ? '(silent) ' : ''}${outcome.problem}` })
    }
    report.cases++
    report.byMutation[name] = (report.byMutation[name] ?? 0) + 1
    if (outcome === 'ok') report.repairedOrIntact++
    else if (outcome === 'refused') report.refused++
    else if (outcome === 'undetectable') {
      report.undetectable++
      if (asV0) report.undetectableAsV0++
    }
    else {
      report.failed++
      if (outcome.silent) report.silent++
      if (report.failures.length < 20) {
        report.failures.push(`${name}: ${outcome.silent ? '(silent) ' : ''}${outcome.problem}`)
        report.failingMutants.push(mutant)
      }
    }
  }
  // Every offset of the last two records of every base log.
  for (const { events, bytes } of bases) {
    const starts = lineStarts(bytes)
    const from = starts[starts.length - 2] ?? 0
    for (let k = from; k < bytes.length && report.cases < options.cases; k++) await record('truncate-every-offset', events, bytes.subarray(0, k))
  }
  if (options.hugeLine) {
    const { events, bytes } = bases[0]!
    await record('huge-line', events, mutate(bytes, version, rand, 'huge-line').mutant)
  }
  while (report.cases < options.cases) {
    const { events, bytes } = bases[Math.floor(rand() * bases.length)]!
    const { name, mutant, asV0 } = mutate(bytes, version, rand)
    await record(name, events, mutant, asV0)
  }
  return report
}
