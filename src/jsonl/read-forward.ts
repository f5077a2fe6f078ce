import type { FileHandle } from './fs/file-system.js'

const CHUNK_BYTES = 1 << 20

/**
 * The lines of `[from, to)` as strings without their `\n`, one chunk read at a time (memory: a
 * chunk plus the longest line). `from` must be a line start and `to` a line end: a pass that
 * already checked the log knows both (a last piece without `\n` is not yielded).
 */
export async function* forEachBlockForward(handle: FileHandle, from: number, to: number): AsyncGenerator<string> {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES)
  let pos = from
  let carry: Buffer[] = []
  while (pos < to) {
    const n = await handle.read(chunk, 0, Math.min(chunk.length, to - pos), pos)
    if (n === 0) return
    pos += n
    let i = 0
    for (let nl = chunk.indexOf(10, i); nl !== -1 && nl < n; nl = chunk.indexOf(10, i)) {
      if (carry.length > 0) {
        carry.push(chunk.subarray(i, nl))
        const line = Buffer.concat(carry).toString('utf8')
        carry = []
        yield line
      } else {
        yield chunk.toString('utf8', i, nl)
      }
      i = nl + 1
    }
    if (i < n) carry.push(Buffer.from(chunk.subarray(i, n))) // copy: `chunk` is reused
  }
}
