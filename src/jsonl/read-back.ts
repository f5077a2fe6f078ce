import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import type { FileHandle } from './fs/file-system.js'

const BACK_CHUNK = 1 << 20
/** Past this many carried bytes a line is read again whole instead of joined from its pieces. */
const LONG_CARRY = 1 << 20
// Reading buffers of finished scans, reused (a resume reads about 1 MiB backwards each time).
const spare: Buffer[] = []

/**
 * Reads `[from, to)` of a file backwards, one block of whole lines at a time, newest first: each
 * block starts at a line start and ends just after a `\n` (a last line without one, at `to`, is
 * left out: a torn tail is never a line). `from` must be a line start. Return `false` from
 * `visit` to stop. Memory: one chunk plus the longest line; a line longer than `MAX_LINE_BYTES`
 * (damage: no append writes one) is left out like a torn one, never held.
 */
export async function forEachBlockBackward(
  handle: FileHandle,
  from: number,
  to: number,
  visit: (block: Buffer, offset: number) => boolean | void | Promise<boolean | void>,
  chunkBytes = BACK_CHUNK,
  /** The first read's size, doubled at each read up to `chunkBytes`: what is near the end costs little. */
  firstChunkBytes = chunkBytes,
): Promise<void> {
  let pos = to
  let size = Math.min(firstChunkBytes, chunkBytes)
  let carry: Buffer[] = [] // later pieces of a line that begins before `pos`, in file order
  let carried = 0
  let carryEnd = to // where the carried bytes end in the file (they start at `pos`)
  // A line carried past LONG_CARRY bytes is not kept piece by piece: once its start is found it
  // is read again whole into one buffer of its size (memory: that buffer, not pieces plus their join).
  let long = false
  let torn = true // until the first `\n` from the end: bytes after it are a torn tail
  // A spare buffer serves any smaller chunk size too (only its first chunkBytes are used).
  const buffer = (chunkBytes <= BACK_CHUNK ? spare.pop() : undefined) ?? Buffer.allocUnsafe(Math.max(chunkBytes, BACK_CHUNK))
  try {
    while (pos > from) {
      const n = Math.min(size, pos - from)
      size = Math.min(size * 2, chunkBytes)
      const chunk = buffer.subarray(0, n) // reused: what is kept past this read (carry) is copied
      let got = 0
      while (got < n) {
        const r = await handle.read(chunk, got, n - got, pos - n + got)
        if (r === 0) return // the file shrank under us: nothing more to read reliably
        got += r
      }
      pos -= n
      let end = n
      if (torn) {
        end = chunk.lastIndexOf(10) + 1
        if (end === 0) continue
        torn = false
      }
      // Whole lines start after the first `\n` of the chunk, or at `from`.
      const cut = pos > from ? chunk.indexOf(10) + 1 : 0
      if (cut === 0 && pos > from) {
        // One line longer than a chunk: keep reading back.
        if (carried === 0) carryEnd = pos + end
        carried += end
        if (carried > MAX_LINE_BYTES) {
          carry = [] // too long to be a line: skipped, as a torn one is
          carried = 0
          long = false
          torn = true
        } else if (long || carried > LONG_CARRY) {
          carry = []
          long = true
        } else carry.unshift(Buffer.from(chunk.subarray(0, end)))
        continue
      }
      let block: Buffer
      if (long) {
        block = Buffer.allocUnsafe(carryEnd - (pos + cut))
        for (let got = 0; got < block.length; ) {
          const r = await handle.read(block, got, block.length - got, pos + cut + got)
          if (r === 0) return // the file shrank under us
          got += r
        }
        long = false
      } else block = carry.length > 0 ? Buffer.concat([chunk.subarray(cut, end), ...carry]) : chunk.subarray(cut, end)
      carry = cut > 0 ? [Buffer.from(chunk.subarray(0, cut))] : []
      carried = cut
      carryEnd = pos + cut
      if (block.length > 0 && (await visit(block, pos + cut)) === false) return
    }
  } finally {
    if (buffer.length === BACK_CHUNK && spare.length < 4) spare.push(buffer)
  }
}
