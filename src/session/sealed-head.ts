/**
 * A listing's fast path for headers of format version 1 (§16), run on the threads that read them
 * (jsonl/fs/peek-files.ts runs this function's source text there, so it uses nothing but its
 * arguments: no imports, no names from around it).
 *
 * For a whole first line `line[0, len)` (its `\n` excluded) it copies the line's JSON text without
 * its checksum field (`P + '}'`, as `unsealText` gives) to `out` at `at` and returns the offset
 * after it, or returns -1 and copies nothing. It copies only a line that `parseHeaderLine` would
 * read as this same text: one that ends with the checksum field as version 1 writes it, whose
 * CRC-32 matches, that is valid UTF-8, and whose text is one JSON object — it starts with `{` and
 * its braces and brackets, outside strings, close only at its last byte. Such texts joined with
 * commas inside `[` … `]` are an array of exactly one element per text, or no JSON at all: a text
 * cannot end inside a string or close its object early, so none can run into the next. Whether
 * each is valid JSON is left to the one `JSON.parse` of the array.
 */
export function copySealedHead(
  line: Uint8Array,
  len: number,
  out: Uint8Array,
  at: number,
  crc32: (data: Uint8Array) => number,
  isUtf8: (data: Uint8Array) => boolean,
): number {
  // `,"crc":"` + 8 lowercase hex digits + `"}`: 18 bytes (line-codec.ts CRC_SUFFIX_BYTES).
  const SUFFIX = 18
  if (len < SUFFIX + 1 || line[0] !== 0x7b || line[len - 1] !== 0x7d || line[len - 2] !== 0x22) return -1
  const field = len - SUFFIX
  const prefix = [0x2c, 0x22, 0x63, 0x72, 0x63, 0x22, 0x3a, 0x22] // ,"crc":"
  for (let i = 0; i < 8; i++) if (line[field + i] !== prefix[i]) return -1
  let stored = 0
  for (let i = field + 8; i < field + 16; i++) {
    const c = line[i]!
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1
    if (d < 0) return -1
    stored = stored * 16 + d
  }
  const body = line.subarray(0, field)
  if (crc32(body) !== stored || !isUtf8(line.subarray(0, len))) return -1
  // One object: depth 1 from the first `{` to the end of `P`, never 0 before, not in a string at its end.
  let depth = 0
  let inString = false
  for (let i = 0; i < field; i++) {
    const c = line[i]!
    if (inString) {
      if (c === 0x5c) i++ // a backslash escapes the next byte (`\"`, `\\`; a `\u` escape's digits are no quote)
      else if (c === 0x22) inString = false
      continue
    }
    if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) depth++
    else if (c === 0x7d || c === 0x5d) {
      depth--
      if (depth < 1) return -1
    }
  }
  if (inString || depth !== 1) return -1
  out.set(body, at)
  out[at + field] = 0x7d
  return at + field + 1
}
