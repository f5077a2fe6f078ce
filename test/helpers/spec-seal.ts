import { crc32 } from 'node:zlib'

// §16's line formula written out from the spec, not taken from the package's code: what the tests
// check the package's lines against. For JSON text `P + '}'`, the line is
// `P + ',"crc":"' + H + '"}'`, H the CRC-32 of P's UTF-8 bytes in 8 lowercase hex digits.

const hexCrc = (p: string) => crc32(Buffer.from(p, 'utf8')).toString(16).padStart(8, '0')

/** The version-1 line of JSON text (no `\n`). */
export function specSeal(json: string): string {
  const p = json.slice(0, -1)
  return `${p},"crc":"${hexCrc(p)}"}`
}

/** Whether a line (no `\n`) is sealed as the formula says. */
export function isSpecSealed(line: string): boolean {
  const m = /^(.*),"crc":"([0-9a-f]{8})"\}$/.exec(line)
  return m !== null && hexCrc(m[1]!) === m[2]
}
