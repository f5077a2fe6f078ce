// What a load must make of a log's bytes, decided from the contract's rules for reading a log
// (docs/contract.md §3.3, §6, §6.1) and written apart from the package's scanner: the proofs
// compare every load and inspect with this, line by line, so a scanner that returned other
// events (or refused, or cut, elsewhere) fails them.
import type { SessionEvent } from '../session/schema.js'
import { expectedClosers } from './closers-oracle.js'

export type OracleVerdict =
  | { refuse: 'E_CORRUPT' | 'E_FORMAT_UNSUPPORTED'; line: number; byteOffset: number }
  | {
      refuse?: undefined
      createdAt: number
      /** The valid prefix: every event line up to the first defect. */
      kept: SessionEvent[]
      closers: SessionEvent[]
      /** Where the file must be cut (the first defect's offset); undefined when nothing is cut. */
      cutAt: number | undefined
      droppedLines: number
      droppedTurnEnds: number
      droppedBytes: number
    }

interface Line {
  start: number
  end: number // exclusive, without the newline
  complete: boolean
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

function splitLines(bytes: Buffer): Line[] {
  const lines: Line[] = []
  let start = 0
  while (start < bytes.length) {
    const nl = bytes.indexOf(0x0a, start)
    if (nl === -1) {
      lines.push({ start, end: bytes.length, complete: false })
      break
    }
    lines.push({ start, end: nl, complete: true })
    start = nl + 1
  }
  return lines
}

/** The JSON value of a line, or undefined when its bytes are not UTF-8 JSON text. */
function jsonOf(bytes: Buffer, line: Line): { value: unknown } | undefined {
  let text: string
  try {
    text = strictUtf8.decode(bytes.subarray(line.start, line.end))
  } catch {
    return undefined // bytes that are not UTF-8 are not JSON text
  }
  try {
    return { value: JSON.parse(text) }
  } catch {
    return undefined
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const isCount = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0

function headerIsValid(h: Record<string, unknown>, id: string): boolean {
  if (h.type !== 'session' || h.version !== 0) return false
  if (typeof h.id !== 'string' || h.id.length === 0 || h.id !== id) return false
  if (!isCount(h.createdAt) || !isCount(h.delegationDepth)) return false
  if (h.cwd !== undefined && !(typeof h.cwd === 'string' && h.cwd.startsWith('/'))) return false
  if (h.parentSession !== undefined && !(typeof h.parentSession === 'string' && h.parentSession.length > 0)) return false
  if (h.seedLength !== undefined && !(isCount(h.seedLength) && h.parentSession !== undefined)) return false
  return true
}

/** The event a line holds when it is a valid event line with seq `seq`, else undefined. */
function eventOf(bytes: Buffer, line: Line, seq: number): SessionEvent | undefined {
  if (!line.complete) return undefined
  const v = jsonOf(bytes, line)?.value
  if (!isObject(v)) return undefined
  if (v.seq !== seq) return undefined // also refuses a non-number seq
  if (typeof v.type !== 'string' || v.type.length === 0) return undefined
  if (typeof v.time !== 'number' || !Number.isFinite(v.time)) return undefined
  if ('ignorable' in v && v.ignorable !== true) return undefined
  return v as SessionEvent
}

function isTurnEndLine(bytes: Buffer, line: Line): boolean {
  if (!line.complete) return false
  const v = jsonOf(bytes, line)?.value
  return isObject(v) && v.type === 'turn/end'
}

/**
 * The verdict for the log of session `id` whose file holds `bytes`, for a `load` with the
 * default options. A log is refused with `E_FORMAT_UNSUPPORTED` when its first line is JSON
 * with a numeric `version` other than 0, with `E_CORRUPT` for any other invalid first line, or
 * when the first defective event line lies at or before the last complete `turn/end` line and
 * holds no NUL byte. Otherwise the valid prefix is kept, everything from the first defect on is
 * cut, and the closers of an open turn follow.
 */
export function expectLoad(bytes: Buffer, id: string): OracleVerdict {
  const lines = splitLines(bytes)
  const first = lines[0]
  const corruptHeader = { refuse: 'E_CORRUPT', line: 1, byteOffset: 0 } as const
  if (!first || !first.complete) return corruptHeader
  const header = jsonOf(bytes, first)?.value
  if (isObject(header) && typeof header.version === 'number' && header.version !== 0) {
    return { refuse: 'E_FORMAT_UNSUPPORTED', line: 1, byteOffset: 0 }
  }
  if (!isObject(header) || !headerIsValid(header, id)) return corruptHeader
  const kept: SessionEvent[] = []
  let defect = -1 // index into `lines` of the first defect
  for (let i = 1; i < lines.length; i++) {
    const e = eventOf(bytes, lines[i]!, kept.length)
    if (!e) {
      defect = i
      break
    }
    kept.push(e)
  }
  let commit = -1
  for (let i = lines.length - 1; i >= 1 && commit === -1; i--) if (isTurnEndLine(bytes, lines[i]!)) commit = i
  const createdAt = header.createdAt as number
  if (defect === -1) {
    return { createdAt, kept, closers: expectedClosers(kept, createdAt), cutAt: undefined, droppedLines: 0, droppedTurnEnds: 0, droppedBytes: 0 }
  }
  const d = lines[defect]!
  const hasNul = bytes.subarray(d.start, d.end).includes(0)
  if (!hasNul && defect <= commit) return { refuse: 'E_CORRUPT', line: defect + 1, byteOffset: d.start }
  const dropped = lines.slice(defect)
  return {
    createdAt,
    kept,
    closers: expectedClosers(kept, createdAt),
    cutAt: d.start,
    droppedLines: dropped.length,
    droppedTurnEnds: hasNul ? dropped.filter((l) => isTurnEndLine(bytes, l)).length : 0,
    droppedBytes: bytes.length - d.start,
  }
}

/** The file a load must leave: the kept bytes, then one line per closer. */
export function expectedFileAfterLoad(bytes: Buffer, verdict: Exclude<OracleVerdict, { refuse: string }>): Buffer {
  const kept = bytes.subarray(0, verdict.cutAt ?? bytes.length)
  return Buffer.concat([kept, Buffer.from(verdict.closers.map((c) => `${JSON.stringify(c)}\n`).join(''))])
}
