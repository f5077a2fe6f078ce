import { isUtf8 } from 'node:buffer'
import type { FileHandle } from './fs/file-system.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'

/**
 * Called once per line, synchronously. `buf[start, end)` is the line without its `\n`; the
 * bytes are only valid during the call. `offset` is the file offset where the line starts;
 * `complete` is false for a last line that has no `\n`. `text`, when given, is the line already
 * decoded from bytes known to be valid UTF-8. Return `false` to stop reading. `oversized`, when
 * given, is the length of a line longer than `MAX_LINE_BYTES`: its bytes were not kept (memory
 * stays bounded, §15.5), and `buf[start, end)` holds only its first 64 KiB.
 */
export type LineVisitor = (
  buf: Buffer,
  start: number,
  end: number,
  offset: number,
  complete: boolean,
  text?: string,
  oversized?: number,
) => boolean | void

const CHUNK_BYTES = 1 << 20
/** What an oversized line's visitor is shown of it. */
const OVERSIZED_PREFIX = 64 * 1024

// Chunks of finished reads, reused: a load of a small log would otherwise allocate (and the GC
// reclaim) a whole chunk per call. Visitors never keep the bytes past their call.
const spareChunks: Buffer[] = []

/**
 * Reads `[from, to)` of a file as a stream of lines, never holding the file as one string or
 * one buffer (docs/contract.md §6, rule 5): memory is one chunk plus the longest line. Resolves
 * with the offset reading stopped at. The chunk is a spare one when there is one.
 */
export async function forEachLine(
  handle: FileHandle,
  visit: LineVisitor,
  options: Parameters<typeof readLines>[2] = {},
): Promise<number> {
  const size = options.chunkBytes ?? CHUNK_BYTES
  // A spare chunk serves a smaller chunk size too (a watcher's wake reads 64 KiB at most).
  const whole = (size <= CHUNK_BYTES ? spareChunks.pop() : undefined) ?? Buffer.allocUnsafe(size)
  try {
    return await readLines(handle, visit, options, whole.length === size ? whole : whole.subarray(0, size))
  } finally {
    if (whole.length === CHUNK_BYTES && spareChunks.length < 4) spareChunks.push(whole)
  }
}

/** The offsets of the `\n` bytes of `buf[from, last]`, `last` being one. */
function newlinesIn(buf: Buffer, from: number, last: number): number[] {
  const out: number[] = []
  for (let at = buf.indexOf(10, from); at !== -1 && at <= last; at = buf.indexOf(10, at + 1)) out.push(at)
  return out
}

async function readLines(
  handle: FileHandle,
  visit: LineVisitor,
  options: {
    from?: number
    to?: number
    chunkBytes?: number
    decode?: boolean
    /** Awaited after the lines of each chunk were visited (a caller that writes what it saw, §16 migrate). */
    afterChunk?: () => Promise<void>
    /** Stop after a read that returned less than asked (the end of a regular file): no read of 0 bytes to learn it. */
    stopAtShortRead?: boolean
    /**
     * Called with the whole lines `buf[start, end)` of a chunk (`end` just after a `\n`), and the
     * offset of each line's `\n`, before they are visited (with `decode`, before they are decoded
     * at once). The caller may change bytes inside those lines in place, never a `\n`, and visits
     * see them changed (§16: a checked checksum field becomes whitespace, so the line parses
     * without a copy).
     */
    beforeLines?: (buf: Buffer, start: number, end: number, newlines: readonly number[]) => void
  },
  chunk: Buffer,
): Promise<number> {
  const to = options.to ?? Number.POSITIVE_INFINITY
  let pos = options.from ?? 0
  let lineOffset = pos
  let carry: Buffer[] = [] // pieces of a line that spans chunks
  let carried = 0 // their bytes
  // A line longer than a chunk is not kept in pieces: where it starts. Once its end is found it
  // is read again whole, into one buffer of its size: memory is that buffer and one chunk, never
  // the pieces and their join too (§15.5: a huge line costs its size once more, not twice).
  let long: { start: number } | undefined
  // A line longer than MAX_LINE_BYTES is not kept: its start, and how long it has grown.
  let oversized: { prefix: Buffer; length: number } | undefined
  while (pos < to) {
    const want = Math.min(chunk.length, to - pos)
    const n = await handle.read(chunk, 0, want, pos)
    if (n === 0) break
    const view = chunk.subarray(0, n)
    let i = 0
    if (long) {
      const nl = view.indexOf(10)
      if ((nl === -1 ? pos + n : pos + nl) - long.start > MAX_LINE_BYTES) {
        // Longer than a line may be: its first bytes kept, as a line carried in pieces would be
        // (this chunk's bytes are counted just below).
        oversized = { prefix: await readAt(handle, OVERSIZED_PREFIX, long.start, false), length: pos - long.start }
        long = undefined
      } else if (nl === -1) {
        pos += n
        if (options.stopAtShortRead && n < want) break
        continue
      } else {
        const line = await readAt(handle, pos + nl - long.start, long.start, true)
        long = undefined
        const keepGoing = visit(line, 0, line.length, lineOffset, true)
        lineOffset = pos + nl + 1
        i = nl + 1
        if (keepGoing === false) return lineOffset
      }
    }
    if (oversized) {
      const nl = view.indexOf(10)
      if (nl === -1) {
        oversized.length += n
        pos += n
        continue
      }
      oversized.length += nl
      const { prefix, length } = oversized
      oversized = undefined
      const keepGoing = visit(prefix, 0, prefix.length, lineOffset, true, undefined, length)
      lineOffset = pos + nl + 1
      i = nl + 1
      if (keepGoing === false) return lineOffset
    }
    if (carry.length > 0) {
      const nl = view.indexOf(10)
      if (nl !== -1) {
        let keepGoing: boolean | void
        if (carried + nl > MAX_LINE_BYTES) {
          // Longer than a line may be, though what came before this chunk was not: the same
          // verdict whatever the chunk boundaries (its bytes not joined).
          const prefix = Buffer.concat(carry, Math.min(OVERSIZED_PREFIX, carried))
          const length = carried + nl
          carry = []
          carried = 0
          keepGoing = visit(prefix, 0, prefix.length, lineOffset, true, undefined, length)
        } else {
          carry.push(view.subarray(0, nl))
          const line = Buffer.concat(carry)
          carry = []
          carried = 0
          keepGoing = visit(line, 0, line.length, lineOffset, true)
        }
        lineOffset = pos + nl + 1
        i = nl + 1
        if (keepGoing === false) return lineOffset
      }
    }
    // Fast path: validate and decode all complete lines of the chunk at once, then walk byte
    // and character offsets in step (in valid UTF-8, the k-th 0x0A byte is the k-th '\n').
    const lastNl = (options.decode || options.beforeLines) && carry.length === 0 ? view.lastIndexOf(10) : -1
    // Each `\n` of those lines found once, for the hook and the decoded walk (a search per line
    // and per pass cost a fresh process's first load a millisecond).
    const newlines = lastNl >= i ? newlinesIn(view, i, lastNl) : undefined
    if (options.beforeLines && newlines) options.beforeLines(view, i, lastNl + 1, newlines)
    if (options.decode && newlines && isUtf8(view.subarray(i, lastNl))) {
      const text = view.toString('utf8', i, lastNl + 1)
      // Text of one-byte characters only: character offsets are byte offsets.
      const from = text.length === lastNl + 1 - i ? i : -1
      let c = 0
      for (const nl of newlines) {
        const cnl = from >= 0 ? nl - from : text.indexOf('\n', c)
        const keepGoing = visit(view, i, nl, lineOffset, true, text.slice(c, cnl))
        lineOffset = pos + nl + 1
        i = nl + 1
        c = cnl + 1
        if (keepGoing === false) return lineOffset
      }
    }
    for (;;) {
      const nl = view.indexOf(10, i)
      if (nl === -1) break
      let keepGoing: boolean | void
      if (carry.length > 0) {
        carry.push(view.subarray(i, nl))
        const line = Buffer.concat(carry)
        carry = []
        carried = 0
        keepGoing = visit(line, 0, line.length, lineOffset, true)
      } else {
        keepGoing = visit(view, i, nl, lineOffset, true)
      }
      lineOffset = pos + nl + 1
      i = nl + 1
      if (keepGoing === false) return lineOffset
    }
    if (i < n && !oversized) {
      if (carried + n - i > chunk.length) {
        // Longer than a chunk: found to its end first, then read whole (above).
        long = { start: lineOffset }
        carry = []
        carried = 0
      } else {
        carry.push(Buffer.from(view.subarray(i, n))) // copy: `chunk` is reused
        carried += n - i
      }
    }
    if (options.afterChunk) await options.afterChunk()
    pos += n
    if (options.stopAtShortRead && n < want) break
  }
  if (long) {
    // A last line without its `\n` (a torn tail), longer than a chunk: read whole as it stands.
    const line = await readAt(handle, pos - long.start, long.start, false)
    visit(line, 0, line.length, lineOffset, false)
  } else if (oversized) {
    visit(oversized.prefix, 0, oversized.prefix.length, lineOffset, false, undefined, oversized.length)
  } else if (carry.length > 0) {
    const line = Buffer.concat(carry)
    visit(line, 0, line.length, lineOffset, false)
  }
  return pos
}

/**
 * `length` bytes of the file from `position`, in one buffer of that size. `whole`: they were
 * read before (a line's end was found after them), so a short read means the file shrank under
 * the reader; otherwise what is there is returned.
 */
async function readAt(handle: FileHandle, length: number, position: number, whole: boolean): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(length)
  let got = 0
  while (got < length) {
    const n = await handle.read(buf, got, length - got, position + got)
    if (n === 0) break
    got += n
  }
  if (got < length && whole) throw Object.assign(new Error(`the file shrank while a line at byte ${position} was read`), { code: 'EIO' })
  return got === length ? buf : buf.subarray(0, got)
}
