import { crc32 } from 'node:zlib'
import { LineBuffer } from './line-buffer.js'

/** The format versions this release reads and writes (§16). */
export type FormatVersion = 0 | 1
export const FORMAT_VERSIONS: readonly FormatVersion[] = [0, 1]
/** What a new log is written in unless the configuration says otherwise. */
export const DEFAULT_FORMAT_VERSION: FormatVersion = 1

/** `,"crc":"` + 8 lowercase hex digits + `"}`: what version 1 puts in place of a line's final `}`. */
export const CRC_SUFFIX_BYTES = 18
const PREFIX = ',"crc":"'
const HEX = /^[0-9a-f]{8}$/

/** The bytes version 1 adds to a line: `,"crc":"` + 8 hex digits + `"` (before its final `}`). */
export const CRC_FIELD_BYTES = CRC_SUFFIX_BYTES - 1

const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1')

/**
 * Version-1 lines from version-0 lines (§16): `plain` holds `count` lines of JSON objects, each
 * ending with `}\n` (as `JSON.stringify` writes them: no raw newline inside). One pass, one
 * copy, the checksum over each line's bytes.
 */
export function sealBatch(plain: Buffer, count: number): Buffer {
  const out = Buffer.allocUnsafe(plain.length + count * CRC_FIELD_BYTES)
  let o = 0
  for (let s = 0; s < plain.length; ) {
    const nl = plain.indexOf(10, s)
    const close = nl - 1 // the line's final `}`
    o += plain.copy(out, o, s, close)
    o = writeCrcField(out, o, crc32(plain.subarray(s, close)))
    s = nl + 1
  }
  return out
}

/**
 * The lines of `jsons` (each the `JSON.stringify` of an object) with their `\n`, in `version`,
 * written straight into one buffer of their exact size and sealed there: the text is encoded
 * once and never copied (a batch holding a line of tens of MiB, §15.5: `sealBatch` after a
 * `Buffer.from` of the joined text held four copies of it at once).
 */
export function writeLines(jsons: readonly string[], version: FormatVersion): Buffer {
  const lens = jsons.map((j) => Buffer.byteLength(j))
  const extra = version === 1 ? CRC_FIELD_BYTES : 0
  const out = Buffer.allocUnsafe(lens.reduce((sum, n) => sum + n + extra + 1, 0))
  let o = 0
  for (let i = 0; i < jsons.length; i++) {
    const n = lens[i]!
    out.write(jsons[i]!, o, n, 'utf8')
    if (version === 1) {
      const close = o + n - 1 // the line's final `}`, replaced by the checksum field and its own
      o = writeCrcField(out, close, crc32(out.subarray(o, close)))
    } else {
      o += n
      out[o++] = 0x0a
    }
  }
  return out
}

/** Writes `,"crc":"` + the 8 hex digits of `c` + `"}` + `\n` at `out[o]` (room known); the offset after it. */
function writeCrcField(out: Buffer, o: number, c: number): number {
  o += PREFIX_BYTES.copy(out, o)
  for (let k = 0; k < 8; k++) out[o + k] = HEX_DIGITS[(c >>> (28 - 4 * k)) & 15]!
  o += 8
  out[o++] = 0x22
  out[o++] = 0x7d
  out[o++] = 0x0a
  return o
}

/** CRC-32 (zlib, ISO-HDLC) as 8 lowercase hex digits. */
function hex(value: number): string {
  return value.toString(16).padStart(8, '0')
}

/**
 * A version-1 line from the `JSON.stringify` of an object (§16): for `P + '}'`, the line is
 * `P + ',"crc":"' + H + '"}'` with `H` the CRC-32 of the UTF-8 bytes of `P`. Version 0 lines are
 * the JSON text itself. No `\n`.
 */
export function sealLine(json: string, version: FormatVersion): string {
  if (version === 0) return json
  const p = json.slice(0, -1)
  return `${p}${PREFIX}${hex(crc32(p))}"}`
}

const PREFIX_BYTES = Buffer.from(PREFIX, 'latin1')

/** The value of 8 lowercase hex digits at `buf[at, at + 8)`, or -1. */
function hexAt(buf: Buffer, at: number): number {
  let n = 0
  for (let i = at; i < at + 8; i++) {
    const c = buf[i]!
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1
    if (d < 0) return -1
    n = n * 16 + d
  }
  return n
}

/** Whether a line's bytes end with a checksum field as version 1 writes it. */
export function hasCrcSuffix(buf: Buffer, start: number, end: number): boolean {
  if (end - start < CRC_SUFFIX_BYTES + 1) return false
  const at = end - CRC_SUFFIX_BYTES
  if (buf[end - 1] !== 0x7d || buf[end - 2] !== 0x22) return false
  for (let i = 0; i < 8; i++) if (buf[at + i] !== PREFIX_BYTES[i]) return false
  return hexAt(buf, at + 8) >= 0
}

/**
 * Checks the checksum of a version-1 line `buf[start, end)` (no `\n`): `'ok'`, `'missing'` (no
 * checksum field at its end) or `'mismatch'`.
 */
export function checkLine(buf: Buffer, start: number, end: number): 'ok' | 'missing' | 'mismatch' {
  if (!hasCrcSuffix(buf, start, end)) return 'missing'
  const at = end - CRC_SUFFIX_BYTES
  return crc32(buf.subarray(start, at)) === hexAt(buf, at + 8) ? 'ok' : 'mismatch'
}

/**
 * Turns the checksum field of a checked version-1 line ending at `end` (its `\n`) into `}` and
 * spaces, in place: `P + '}'` followed by whitespace, the same JSON value without the field.
 */
export function unsealLineInPlace(buf: Buffer, end: number): void {
  const at = end - CRC_SUFFIX_BYTES
  buf[at] = 0x7d
  // A loop, not `fill`: 17 bytes, where `fill`'s argument checks cost a fresh process's first
  // load of 1 MiB more than a millisecond.
  for (let i = at + 1; i < end; i++) buf[i] = 0x20
}

/** The JSON text of a checked version-1 line without its checksum field (`P + '}'`). */
export function unsealText(text: string): string {
  return `${text.slice(0, text.length - CRC_SUFFIX_BYTES)}}`
}

/** The JSON text of a version-1 line given as a string, checked: undefined when its checksum is missing or wrong. */
export function unsealString(line: string): string | undefined {
  if (line.length < CRC_SUFFIX_BYTES + 1 || !line.endsWith('"}')) return undefined
  const at = line.length - CRC_SUFFIX_BYTES
  if (line.slice(at, at + 8) !== PREFIX) return undefined
  const want = line.slice(at + 8, at + 16)
  if (!HEX.test(want)) return undefined
  const p = line.slice(0, at)
  return hex(crc32(p)) === want ? `${p}}` : undefined
}

/**
 * Whether `suffix` (the last CRC_SUFFIX_BYTES of a version-1 line, as text) is the checksum
 * field of the bytes before it, whose CRC-32 is `crc`: a line read in parts is checked so.
 */
export function checkSuffix(suffix: string, crc: number): 'ok' | 'missing' | 'mismatch' {
  const digits = suffix.slice(PREFIX.length, PREFIX.length + 8)
  if (suffix.length !== CRC_SUFFIX_BYTES || !suffix.startsWith(PREFIX) || !suffix.endsWith('"}') || !HEX.test(digits)) return 'missing'
  return digits === hex(crc) ? 'ok' : 'mismatch'
}

/** The reason a reader gives for a version-1 line whose checksum fails (§16: it names `checksum mismatch`). */
export function checksumReason(result: 'missing' | 'mismatch'): string {
  return result === 'missing' ? 'checksum mismatch: the line has no checksum' : 'checksum mismatch'
}

/**
 * Version-1 lines built in one growing buffer, straight from the bytes of version-0 lines (§16
 * migrate): the JSON text is copied once and its checksum computed on those bytes, no string
 * made. A line that does not end with `}` (JSON with trailing space, say) is re-serialized.
 */
export class SealedLines extends LineBuffer {
  /** Appends the line `src[start, end)` (the JSON text of one object, no `\n`) sealed, with its `\n`. */
  add(src: Buffer, start: number, end: number): void {
    if (end <= start || src[end - 1] !== 0x7d) {
      this.addText(`${sealLine(JSON.stringify(JSON.parse(src.toString('utf8', start, end))), 1)}\n`)
      return
    }
    const p = end - 1 - start
    this.room(p + CRC_SUFFIX_BYTES + 1)
    src.copy(this.buf, this.len, start, end - 1)
    this.len = writeCrcField(this.buf, this.len + p, crc32(src.subarray(start, end - 1)))
  }
}
