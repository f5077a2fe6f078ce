import type { FileHandle } from './fs/file-system.js'

/** A copy's read size: what a copy holds at once, whatever the range's length (§15.5). */
const COPY_CHUNK = 1 << 20

/**
 * Passes bytes `[from, to)` of an open file to `write`, one piece of at most `chunkBytes` at a
 * time, in order; each piece is written (awaited) before the next is read into the same buffer.
 * `EIO` if the file is shorter than that (it shrank while being read), as `readBytes`.
 */
export async function copyRange(
  handle: FileHandle,
  path: string,
  from: number,
  to: number,
  write: (piece: Buffer) => Promise<void>,
  chunkBytes = COPY_CHUNK,
): Promise<void> {
  const buf = Buffer.allocUnsafe(Math.max(1, Math.min(chunkBytes, to - from)))
  for (let at = from; at < to; ) {
    const want = Math.min(buf.length, to - at)
    let got = 0
    while (got < want) {
      const n = await handle.read(buf, got, want - got, at + got)
      if (n === 0) throw Object.assign(new Error(`${path} shrank while it was being read`), { code: 'EIO' })
      got += n
    }
    await write(buf.subarray(0, want))
    at += want
  }
}
