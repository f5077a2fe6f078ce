import { SessionPersistenceError } from '../errors.js'

/** Longest encoded id: `<encoded>.jsonl` and `<encoded>.lock` then stay within 255 bytes. */
export const MAX_ENCODED_ID_BYTES = 244

// In a `u` regex a surrogate pair is one code point, so this matches lone surrogates only.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u
const HEX = '0123456789ABCDEF'
/** A name with no escape: only the bytes `encodeSessionId` keeps. */
const UNESCAPED = /^[a-z0-9_-]+$/

function keeps(byte: number): boolean {
  return (
    (byte >= 0x61 && byte <= 0x7a) || // a-z
    (byte >= 0x30 && byte <= 0x39) || // 0-9
    byte === 0x5f || // _
    byte === 0x2d // -
  )
}

/**
 * Percent-encodes a session id into one file-name segment (docs/contract.md §3.2): bytes in `[a-z0-9_-]`
 * are kept, every other UTF-8 byte becomes `%XX`. Injective, also on case-insensitive file
 * systems (uppercase letters are always escaped), and never `.`, `..` or a path separator.
 */
export function encodeSessionId(id: string): string {
  if (typeof id !== 'string' || id.length === 0) {
    throw new SessionPersistenceError('E_INVALID_ID', 'session id must be a non-empty string')
  }
  if (LONE_SURROGATE.test(id)) {
    throw new SessionPersistenceError('E_INVALID_ID', 'session id is not well-formed Unicode (lone surrogate)', {
      sessionId: id,
    })
  }
  const bytes = Buffer.from(id, 'utf8')
  let out = ''
  for (const byte of bytes) {
    out += keeps(byte) ? String.fromCharCode(byte) : `%${HEX[byte >> 4]}${HEX[byte & 15]}`
  }
  if (out.length > MAX_ENCODED_ID_BYTES) {
    throw new SessionPersistenceError(
      'E_INVALID_ID',
      `session id encodes to ${out.length} bytes; at most ${MAX_ENCODED_ID_BYTES} are allowed`,
      { sessionId: id },
    )
  }
  return out
}

/** Inverse of encodeSessionId, or undefined when `name` is not an encoding this package writes. */
export function decodeSessionId(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_ENCODED_ID_BYTES) return undefined
  // Most ids escape nothing (uuids, say): such a name is its own id. A listing of 100,000 logs
  // spent a fifth of its time decoding byte by byte what needed no decoding.
  if (UNESCAPED.test(name)) return name
  const bytes: number[] = []
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i)
    if (c === 0x25) {
      const hex = name.slice(i + 1, i + 3)
      if (!/^[0-9A-F]{2}$/.test(hex)) return undefined
      const byte = parseInt(hex, 16)
      if (keeps(byte)) return undefined // not canonical: this byte is never escaped
      bytes.push(byte)
      i += 2
    } else if (keeps(c)) {
      bytes.push(c)
    } else {
      return undefined
    }
  }
  const buf = Buffer.from(bytes)
  const id = buf.toString('utf8')
  // Reject byte sequences that are not valid UTF-8: they would not round-trip.
  return Buffer.from(id, 'utf8').equals(buf) ? id : undefined
}
