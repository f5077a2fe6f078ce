import { isDeepStrictEqual } from 'node:util'
import { headerLine } from '../session/meta.js'
import type { SessionEvent } from '../session/schema.js'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import type { JsonlSessionPersistence, LoadedSession } from '../persistence.js'
import { createCrashFileSystem } from '../testing/crash-fs.js'
import { expectLoad, expectedFileAfterLoad, type OracleVerdict } from './log-oracle.js'
import { seededRandom } from './random.js'

export interface FuzzReport {
  cases: number
  /** Loaded: the original's events up to some point, plus the exact closers. */
  repairedOrIntact: number
  /** Refused with E_CORRUPT or E_FORMAT_UNSUPPORTED, the file byte-for-byte unchanged. */
  refused: number
  /** The mutation left a valid line with another content: format v0 has no checksums to see it. */
  undetectable: number
  failures: string[]
  byMutation: Record<string, number>
}

const ROOT = '/fuzz'
const DIR = `${ROOT}/_no-cwd`
const PATH = `${DIR}/f.jsonl`

type Rand = () => number

function baseLogs(): { events: SessionEvent[]; bytes: Buffer }[] {
  const t = 1_764_489_600_000
  const mk = (events: Omit<SessionEvent, 'seq' | 'time'>[]) => events.map((e, i) => ({ seq: i, time: t + i, ...e }) as SessionEvent)
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
  return logs.map((events) => ({
    events,
    bytes: Buffer.from(headerLine({ id: 'f', createdAt: t, delegationDepth: 0 }) + events.map((e) => `${JSON.stringify(e)}\n`).join('')),
  }))
}

function lineStarts(bytes: Buffer): number[] {
  const starts = [0]
  for (let i = 0; i < bytes.length - 1; i++) if (bytes[i] === 0x0a) starts.push(i + 1)
  return starts
}

/** One mutant of `bytes`, and the name of the mutation. */
function mutate(bytes: Buffer, rand: Rand, forced?: string): { name: string; mutant: Buffer } {
  const int = (n: number) => Math.floor(rand() * n)
  const starts = lineStarts(bytes)
  const lines = starts.map((s, i) => bytes.subarray(s, starts[i + 1] ?? bytes.length))
  const kinds = ['truncate-tail', 'flip-byte', 'nul-range', 'invalid-utf8', 'duplicate-line', 'swap-lines', 'delete-line', 'blank-line', 'garbage-tail', 'damage-header', 'two-mutations']
  const name = forced ?? kinds[int(kinds.length)]!
  switch (name) {
    case 'two-mutations': {
      // Two defects in one log: the rules for the first defect and the commit boundary meet.
      const once = mutate(bytes, rand, kinds[int(kinds.length - 1)]!)
      if (lineStarts(once.mutant).length < 3) return { name, mutant: once.mutant }
      return { name, mutant: mutate(once.mutant, rand, kinds[int(kinds.length - 1)]!).mutant }
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
    case 'nul-range': {
      const m = Buffer.from(bytes)
      const at = rand() < 0.5 ? int(m.length) : Math.floor(int(m.length) / 4096) * 4096
      m.fill(0, at, Math.min(m.length, at + 1 + int(4096)))
      return { name, mutant: m }
    }
    case 'invalid-utf8': {
      const at = int(bytes.length)
      return { name, mutant: Buffer.concat([bytes.subarray(0, at), Buffer.from([[0xff, 0xc3, 0xe2, 0x80][int(4)]!]), bytes.subarray(at)]) }
    }
    case 'duplicate-line': {
      const i = 1 + int(lines.length - 1)
      return { name, mutant: Buffer.concat([...lines.slice(0, i + 1), lines[i]!, ...lines.slice(i + 1)]) }
    }
    case 'swap-lines': {
      const i = 1 + int(Math.max(1, lines.length - 2))
      const swapped = [...lines]
      ;[swapped[i], swapped[i + 1]] = [swapped[i + 1]!, swapped[i]!]
      return { name, mutant: Buffer.concat(swapped.filter(Boolean) as Buffer[]) }
    }
    case 'delete-line': {
      const i = 1 + int(lines.length - 1)
      return { name, mutant: Buffer.concat([...lines.slice(0, i), ...lines.slice(i + 1)]) }
    }
    case 'blank-line': {
      const i = 1 + int(lines.length)
      return { name, mutant: Buffer.concat([...lines.slice(0, i), Buffer.from('\n'), ...lines.slice(i)]) }
    }
    case 'garbage-tail':
      return { name, mutant: Buffer.concat([bytes, Buffer.from(['{"seq":', '\u0000\u0000', '}}}\n', 'null\n', '{"type":"turn/end"'][int(5)]!)]) }
    case 'damage-header': {
      const header = lines[0]!.toString('utf8')
      const variants = [
        header.replace('"version":0', '"version":1'),
        header.replace(',"delegationDepth":0', ''),
        header.replace('"id":"f"', '"id":"g"'),
        header.slice(0, int(header.length)),
        header.replace('"type":"session"', '"type":"sessiom"'),
      ]
      return { name, mutant: Buffer.concat([Buffer.from(variants[int(variants.length)]!), ...lines.slice(1)]) }
    }
    case 'huge-line': {
      const i = lines.length - 1
      const huge = Buffer.alloc(100 * 1024 * 1024 + 1, 0x78)
      huge[huge.length - 1] = 0x0a
      return { name, mutant: Buffer.concat([...lines.slice(0, i), huge, ...lines.slice(i)]) }
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

/**
 * Checks one mutant against what its own bytes say (log-oracle.ts): `inspect` and `load` must
 * keep exactly the valid prefix the oracle reads, with exactly the closers the oracle computes,
 * cut exactly where it says and leave exactly the bytes it expects — or refuse with the code,
 * line and byte it names, the file untouched. Returns the outcome or a failure.
 */
async function checkMutant(original: SessionEvent[], mutant: Buffer, wrap: Wrap): Promise<'ok' | 'refused' | 'undetectable' | string> {
  const verdict = expectLoad(mutant, 'f')
  const fs = await fsWith(mutant)
  const p = wrap(createJsonlPersistence({ root: ROOT, fs }))
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
      if (problem) return problem
    }
    if (inspected && verdict.refuse) return `inspect accepted a log the bytes say is ${verdict.refuse} at line ${verdict.line}`
    let loaded: LoadedSession
    try {
      loaded = await p.load('f')
    } catch (err) {
      const problem = refusal(err, 'load')
      if (problem) return problem
      if (!(await readAll(fs)).equals(mutant)) return 'a refused log was modified'
      return 'refused'
    }
    if (verdict.refuse) return `load accepted a log the bytes say is ${verdict.refuse} at line ${verdict.line}`
    const want = [...verdict.kept, ...verdict.closers]
    if (!inspected || !sameEvents(inspected.events, want)) return 'inspect returned other events than the bytes hold'
    const inspectProblem = reportProblem(inspected.repair, expectedReport(verdict, false))
    if (inspectProblem) return `inspect: ${inspectProblem}`
    if (!sameEvents(loaded.events, want)) {
      const at = loaded.events.findIndex((e, i) => !isDeepStrictEqual(e, want[i]))
      return `load returned ${loaded.events.length} events, the bytes hold ${verdict.kept.length} plus ${verdict.closers.length} closers (first difference at ${at})`
    }
    const loadProblem = reportProblem(loaded.repair, expectedReport(verdict, true))
    if (loadProblem) return `load: ${loadProblem}`
    if (!(await readAll(fs)).equals(expectedFileAfterLoad(mutant, verdict))) return 'the repaired file holds other bytes than the kept prefix plus the closers'
    await p.close('f')
    const again = await p.load('f')
    if (again.repair !== undefined || !sameEvents(again.events, loaded.events)) return 'a second load changed something'
    // Counted, not failed: a mutation that leaves valid lines with other content is invisible
    // to format v0, which has no checksums.
    return sameEvents(verdict.kept, original.slice(0, verdict.kept.length)) && verdict.kept.length <= original.length ? 'ok' : 'undetectable'
  } finally {
    await p.closeAll()
  }
}

/**
 * Mutates valid logs `cases` times (every offset of the last records truncated first, then
 * random flips, NULs, invalid UTF-8, duplicated, swapped, deleted and blank lines, garbage tails,
 * damaged headers, and — when `hugeLine` — one 100 MB line) and checks every mutant.
 */
export async function runFuzz(options: { cases: number; seed?: number; hugeLine?: boolean; wrap?: Wrap }): Promise<FuzzReport> {
  const wrap = options.wrap ?? ((p) => p)
  const rand: Rand = seededRandom(options.seed ?? 7)
  const bases = baseLogs()
  const report: FuzzReport = { cases: 0, repairedOrIntact: 0, refused: 0, undetectable: 0, failures: [], byMutation: {} }
  const record = async (name: string, original: SessionEvent[], mutant: Buffer) => {
    const outcome = await checkMutant(original, mutant, wrap)
    report.cases++
    report.byMutation[name] = (report.byMutation[name] ?? 0) + 1
    if (outcome === 'ok') report.repairedOrIntact++
    else if (outcome === 'refused') report.refused++
    else if (outcome === 'undetectable') report.undetectable++
    else if (report.failures.length < 20) report.failures.push(`${name}: ${outcome}`)
  }
  // Every offset of the last two records of every base log.
  for (const { events, bytes } of bases) {
    const starts = lineStarts(bytes)
    const from = starts[starts.length - 2] ?? 0
    for (let k = from; k < bytes.length && report.cases < options.cases; k++) await record('truncate-every-offset', events, bytes.subarray(0, k))
  }
  if (options.hugeLine) {
    const { events, bytes } = bases[0]!
    await record('huge-line', events, mutate(bytes, rand, 'huge-line').mutant)
  }
  while (report.cases < options.cases) {
    const { events, bytes } = bases[Math.floor(rand() * bases.length)]!
    const { name, mutant } = mutate(bytes, rand)
    await record(name, events, mutant)
  }
  return report
}
