// Could `migrate` (§16, #20: ≥ 0.8× a raw read + write + fsync) check each line without
// JSON.parse? Times, on the format-v1 bench's ~400-byte lines (2,000 lines × 200 rounds,
// ~162 MiB): JSON.parse (one decode per chunk, and per line), a hand-written JSON validator
// that builds nothing (strict RFC 8259 grammar over the bytes, no escapes decoded), isUtf8 and
// zlib.crc32 of every line. A migrate must also check UTF-8 and compute the checksum, so the
// validator's gain over JSON.parse bounds what skipping the parse could give.
//
//   node bench/probes/validate-vs-parse.mjs
import { crc32 } from 'node:zlib'
import { isUtf8 } from 'node:buffer'
const TEXT = 'The quick brown fox jumps over the lazy dog while the agent streams its answer. '.repeat(5).slice(0, 300)
const event = (seq) => ({ seq, type: 'assistant/chunk', time: 1_764_489_600_000 + seq, data: { turn: 1, step: 0, chunk: { type: 'text-delta', text: TEXT } } })
const lines = []
for (let i = 0; i < 2000; i++) lines.push(JSON.stringify(event(i)))
const buf = Buffer.from(lines.join('\n') + '\n')
const nls = []; for (let a = buf.indexOf(10); a !== -1; a = buf.indexOf(10, a + 1)) nls.push(a)

// returns end index of valid value starting at i, or -1
function skipWs(b, i, end) { while (i < end) { const c = b[i]; if (c === 32 || c === 9 || c === 13 || c === 10) i++; else break } return i }
function str(b, i, end) { // i at opening quote; returns index after closing quote or -1
  i++
  for (;;) {
    if (i >= end) return -1
    const c = b[i]
    if (c === 34) return i + 1
    if (c < 32) return -1
    if (c === 92) {
      const d = b[i + 1]
      if (d === 117) { for (let k = 2; k < 6; k++) { const h = b[i + k]; if (!((h >= 48 && h <= 57) || ((h | 32) >= 97 && (h | 32) <= 102))) return -1 } ; i += 6; continue }
      if (d === 34 || d === 92 || d === 47 || d === 98 || d === 102 || d === 110 || d === 114 || d === 116) { i += 2; continue }
      return -1
    }
    i++
  }
}
function num(b, i, end) {
  if (b[i] === 45) i++
  if (b[i] === 48) i++
  else if (b[i] >= 49 && b[i] <= 57) { i++; while (b[i] >= 48 && b[i] <= 57) i++ }
  else return -1
  if (b[i] === 46) { i++; if (!(b[i] >= 48 && b[i] <= 57)) return -1; while (b[i] >= 48 && b[i] <= 57) i++ }
  if (b[i] === 101 || b[i] === 69) { i++; if (b[i] === 43 || b[i] === 45) i++; if (!(b[i] >= 48 && b[i] <= 57)) return -1; while (b[i] >= 48 && b[i] <= 57) i++ }
  return i > end ? -1 : i
}
const stack = new Uint8Array(256)
function validate(b, start, end) {
  let depth = 0
  let i = skipWs(b, start, end)
  // expect value
  let state = 0 // 0 want value, 1 after value
  for (;;) {
    if (state === 0) {
      if (i >= end) return false
      const c = b[i]
      if (c === 123 || c === 91) {
        if (depth === 256) return false
        stack[depth++] = c
        i = skipWs(b, i + 1, end)
        if (b[i] === c + 2 && i < end) { depth--; i++; state = 1; continue }
        if (c === 123) { if (b[i] !== 34) return false; i = str(b, i, end); if (i < 0) return false; i = skipWs(b, i, end); if (b[i] !== 58 || i >= end) return false; i = skipWs(b, i + 1, end) }
        continue
      }
      if (c === 34) { i = str(b, i, end); if (i < 0) return false }
      else if (c === 45 || (c >= 48 && c <= 57)) { i = num(b, i, end); if (i < 0) return false }
      else if (c === 116) { if (b[i+1] !== 114 || b[i+2] !== 117 || b[i+3] !== 101 || i + 4 > end) return false; i += 4 }
      else if (c === 102) { if (b[i+1] !== 97 || b[i+2] !== 108 || b[i+3] !== 115 || b[i+4] !== 101 || i + 5 > end) return false; i += 5 }
      else if (c === 110) { if (b[i+1] !== 117 || b[i+2] !== 108 || b[i+3] !== 108 || i + 4 > end) return false; i += 4 }
      else return false
      state = 1
    }
    // after value
    i = skipWs(b, i, end)
    if (depth === 0) return i === end
    if (i >= end) return false
    const c = b[i]
    const top = stack[depth - 1]
    if (c === 44) {
      i = skipWs(b, i + 1, end)
      if (top === 123) { if (b[i] !== 34 || i >= end) return false; i = str(b, i, end); if (i < 0) return false; i = skipWs(b, i, end); if (b[i] !== 58 || i >= end) return false; i = skipWs(b, i + 1, end) }
      state = 0
      continue
    }
    if (c === top + 2) { depth--; i++; state = 1; continue }
    return false
  }
}
const R = 200
for (const [name, f] of [
  ['parse', () => { let s = 0; for (let r = 0; r < R; r++) { const t = buf.toString('utf8'); let a = 0; for (const nl of nls) { JSON.parse(t.slice(a, nl)); a = nl + 1 } } }],
  ['parse-per-line-decode', () => { for (let r = 0; r < R; r++) { let a = 0; for (const nl of nls) { JSON.parse(buf.toString('utf8', a, nl)); a = nl + 1 } } }],
  ['validate', () => { for (let r = 0; r < R; r++) { let a = 0; for (const nl of nls) { if (!validate(buf, a, nl)) throw new Error('x ' + a); a = nl + 1 } } }],
  ['isUtf8', () => { for (let r = 0; r < R; r++) { let a = 0; for (const nl of nls) { isUtf8(buf.subarray(a, nl)); a = nl + 1 } } }],
  ['crc', () => { for (let r = 0; r < R; r++) { let a = 0; for (const nl of nls) { crc32(buf.subarray(a, nl)); a = nl + 1 } } }],
]) { for (let w = 0; w < 3; w++) { const s = performance.now(); f(); const ms = performance.now() - s; if (w === 2) console.log(name, ms.toFixed(0), 'ms for', (buf.length * R / 2**20).toFixed(0), 'MiB') } }
