// What a load must make of a log's bytes, decided from the contract's rules for reading a log
// (docs/contract.md §3.3, §6, §6.1, §16) and written apart from the package's scanner and line
// codec: the proofs compare every load and inspect with this, line by line, so a scanner that
// returned other events (or refused, or cut, elsewhere) fails them. The checksum of format
// version 1 is computed here from §16's text with zlib's CRC-32, never with the package's codec.
import { crc32 } from 'node:zlib'
import type { SessionEvent } from '../session/schema.js'
import { expectedClosers } from './closers-oracle.js'

export type OracleVerdict =
  | { refuse: 'E_CORRUPT' | 'E_FORMAT_UNSUPPORTED'; line: number; byteOffset: number }
  | {
      refuse?: undefined
      /** The log's format version (its header's, §16): the closers are written in it. */
      version: 0 | 1
      createdAt: number
      /** The valid prefix: every event line up to the first defect, each without its checksum field. */
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
const hasNul = (bytes: Buffer, line: Line) => bytes.subarray(line.start, line.end).includes(0)

// §16: `P + ',"crc":"' + H + '"}'`, H the CRC-32 of P's bytes as 8 lowercase hex digits.
const CRC_OPEN = Buffer.from(',"crc":"', 'latin1')
const CRC_CLOSE = Buffer.from('"}', 'latin1')
const SEAL_BYTES = CRC_OPEN.length + 8 + CRC_CLOSE.length
const LOWER_HEX = /^[0-9a-f]{8}$/

const hex8 = (n: number) => n.toString(16).padStart(8, '0')

/**
 * The line §16 writes for the JSON text `json` of an object (so ending in `}`), without its
 * newline: the checksum field last, the CRC-32 of the UTF-8 bytes before it. Bytes are sealed
 * as they are (the fuzzer seals lines that are not UTF-8 too).
 */
export function sealBytes(json: Buffer): Buffer {
  if (json[json.length - 1] !== 0x7d) throw new Error('only an object is sealed')
  const p = json.subarray(0, -1)
  return Buffer.concat([p, CRC_OPEN, Buffer.from(hex8(crc32(p)), 'latin1'), CRC_CLOSE])
}

export const sealJson = (json: string): string => sealBytes(Buffer.from(json, 'utf8')).toString('utf8')

/**
 * Whether a line ends with its checksum field and the field matches: the last bytes are
 * `,"crc":"` + 8 lowercase hex digits + `"}`, and those digits are the CRC-32 of every byte
 * before the field. Anything else (no field, another spelling, another value) fails.
 */
function sealed(bytes: Buffer, line: Line): boolean {
  const at = line.end - SEAL_BYTES
  if (at < line.start) return false
  if (!bytes.subarray(at, at + CRC_OPEN.length).equals(CRC_OPEN)) return false
  if (!bytes.subarray(line.end - CRC_CLOSE.length, line.end).equals(CRC_CLOSE)) return false
  const hex = bytes.subarray(at + CRC_OPEN.length, at + CRC_OPEN.length + 8).toString('latin1')
  return LOWER_HEX.test(hex) && crc32(bytes.subarray(line.start, at)) === Number.parseInt(hex, 16)
}

/** A line's object with its checksum field removed (readers remove it: §16). */
function withoutCrc(v: Record<string, unknown>): Record<string, unknown> {
  const { crc: _crc, ...rest } = v
  return rest
}

function headerIsValid(h: Record<string, unknown>, id: string): boolean {
  if (h.type !== 'session' || (h.version !== 0 && h.version !== 1)) return false
  if (typeof h.id !== 'string' || h.id.length === 0 || h.id !== id) return false
  if (!isCount(h.createdAt) || !isCount(h.delegationDepth)) return false
  if (h.cwd !== undefined && !(typeof h.cwd === 'string' && h.cwd.startsWith('/'))) return false
  if (h.parentSession !== undefined && !(typeof h.parentSession === 'string' && h.parentSession.length > 0)) return false
  if (h.seedLength !== undefined && !(isCount(h.seedLength) && h.parentSession !== undefined)) return false
  return true
}

/**
 * The event a line holds when it is a valid event line with seq `seq`, else undefined. In a
 * version-1 log the line must carry its checksum and match it, and the field is removed. In a
 * version-0 log nothing is checked and a `crc` field is data like any other: `crc` was not
 * reserved before v0.3, and a version-0 log loads as it always did (§16: both versions, forever;
 * only the header is checked whatever its version says).
 */
function eventOf(bytes: Buffer, line: Line, seq: number, version: 0 | 1): SessionEvent | undefined {
  if (!line.complete) return undefined
  const v = jsonOf(bytes, line)?.value
  if (!isObject(v)) return undefined
  if (version === 1 && !sealed(bytes, line)) return undefined
  const e = version === 1 ? withoutCrc(v) : v
  if (e.seq !== seq) return undefined // also refuses a non-number seq
  if (typeof e.type !== 'string' || e.type.length === 0) return undefined
  if (typeof e.time !== 'number' || !Number.isFinite(e.time)) return undefined
  if ('ignorable' in e && e.ignorable !== true) return undefined
  return e as SessionEvent
}

function isTurnEndLine(bytes: Buffer, line: Line): boolean {
  if (!line.complete) return false
  const v = jsonOf(bytes, line)?.value
  return isObject(v) && v.type === 'turn/end'
}

type HeaderVerdict = { refuse: 'E_CORRUPT' | 'E_FORMAT_UNSUPPORTED' } | { header: Record<string, unknown>; version: 0 | 1 }

/**
 * Line 1 (§6 rule 1, §16): a header carrying a `crc` field is checked whatever its version says
 * (a mismatch is `E_CORRUPT`); a version-1 header without one is `E_CORRUPT`; a numeric version
 * other than 0 and 1 is `E_FORMAT_UNSUPPORTED`; any other invalid header is `E_CORRUPT`.
 */
function readHeader(bytes: Buffer, first: Line | undefined, id: string): HeaderVerdict {
  if (!first || !first.complete) return { refuse: 'E_CORRUPT' }
  const value = jsonOf(bytes, first)?.value
  if (!isObject(value)) return { refuse: 'E_CORRUPT' }
  if ('crc' in value ? !sealed(bytes, first) : value.version === 1) return { refuse: 'E_CORRUPT' }
  const header = withoutCrc(value)
  if (typeof header.version === 'number' && header.version !== 0 && header.version !== 1) return { refuse: 'E_FORMAT_UNSUPPORTED' }
  if (!headerIsValid(header, id)) return { refuse: 'E_CORRUPT' }
  return { header, version: header.version as 0 | 1 }
}

/**
 * The verdict for the log of session `id` whose file holds `bytes`, for a `load` with the
 * default options:
 *
 * - line 1 decides first (`readHeader`);
 * - a line is valid when it ends with `\n`, is UTF-8 JSON, passes the envelope, has the next
 *   seq and — in a version-1 log — ends with its checksum field, which matches;
 * - in a version-1 log, a complete line that does not match its checksum (or has none) and
 *   holds no NUL byte is damage wherever it lies (after the commit boundary too, and after a
 *   first defect that holds a NUL byte): `E_CORRUPT` at that line, unless the first defect
 *   already refuses the log at an earlier line;
 * - the first defect refuses the log when it lies at or before the last complete `turn/end`
 *   line and holds no NUL byte (§6 rule 3);
 * - otherwise the valid prefix is kept, everything from the first defect on is cut, and the
 *   closers of an open turn follow.
 */
export function expectLoad(bytes: Buffer, id: string): OracleVerdict {
  const lines = splitLines(bytes)
  const head = readHeader(bytes, lines[0], id)
  if ('refuse' in head) return { refuse: head.refuse, line: 1, byteOffset: 0 }
  const { header, version } = head
  const corruptAt = (i: number) => ({ refuse: 'E_CORRUPT', line: i + 1, byteOffset: lines[i]!.start }) as const
  const kept: SessionEvent[] = []
  let defect = -1 // index into `lines` of the first defect
  for (let i = 1; i < lines.length; i++) {
    const e = eventOf(bytes, lines[i]!, kept.length, version)
    if (!e) {
      defect = i
      break
    }
    kept.push(e)
  }
  let damaged = -1 // version 1: the first complete line without NUL that fails its checksum
  if (version === 1 && defect !== -1) {
    for (let i = defect; i < lines.length && damaged === -1; i++) {
      const l = lines[i]!
      if (l.complete && !hasNul(bytes, l) && !sealed(bytes, l)) damaged = i
    }
  }
  let commit = -1
  for (let i = lines.length - 1; i >= 1 && commit === -1; i--) if (isTurnEndLine(bytes, lines[i]!)) commit = i
  const createdAt = header.createdAt as number
  if (defect === -1) {
    return { version, createdAt, kept, closers: expectedClosers(kept, createdAt), cutAt: undefined, droppedLines: 0, droppedTurnEnds: 0, droppedBytes: 0 }
  }
  const d = lines[defect]!
  const nul = hasNul(bytes, d)
  if (!nul && defect <= commit) return corruptAt(defect)
  if (damaged !== -1) return corruptAt(damaged)
  const dropped = lines.slice(defect)
  return {
    version,
    createdAt,
    kept,
    closers: expectedClosers(kept, createdAt),
    cutAt: d.start,
    droppedLines: dropped.length,
    droppedTurnEnds: nul ? dropped.filter((l) => isTurnEndLine(bytes, l)).length : 0,
    droppedBytes: bytes.length - d.start,
  }
}

/** A line as a writer of `version` writes it (§3.3, §16), with its newline. */
export function lineOf(value: unknown, version: 0 | 1): string {
  const json = JSON.stringify(value)
  return `${version === 1 ? sealJson(json) : json}\n`
}

/** The file a load must leave: the kept bytes, then one line per closer, in the log's version. */
export function expectedFileAfterLoad(bytes: Buffer, verdict: Exclude<OracleVerdict, { refuse: string }>): Buffer {
  const kept = bytes.subarray(0, verdict.cutAt ?? bytes.length)
  return Buffer.concat([kept, Buffer.from(verdict.closers.map((c) => lineOf(c, verdict.version)).join(''))])
}
