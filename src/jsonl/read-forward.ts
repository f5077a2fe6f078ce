import type { FileHandle } from './fs/file-system.js'

const CHUNK_BYTES = 1 << 20

/**
 * The lines of `[from, to)` (line starts and ends a checking pass found) as strings without
 * their `\n`, one chunk read at a time. A line longer than a chunk is found to its end first,
 * then read whole into one buffer of its size and decoded: a huge line costs its bytes and its
 * text, never also its pieces and their join (§15.5). A file found shorter ends the lines (as
 * before: no line is handed out unless its `\n` was read). `from` must be a line start and `to`
 * a line end: a pass that already checked the log knows both.
 */
export async function* forEachBlockForward(handle: FileHandle, from: number, to: number): AsyncGenerator<string> {
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES)
  const readFully = async (buf: Buffer, at: number): Promise<boolean> => {
    for (let got = 0; got < buf.length; ) {
      const n = await handle.read(buf, got, buf.length - got, at + got)
      if (n === 0) return false
      got += n
    }
    return true
  }
  let start = from // where the line being read starts
  for (let pos = from; pos < to; ) {
    const view = chunk.subarray(0, Math.min(chunk.length, to - pos))
    if (!(await readFully(view, pos))) return
    let i = 0
    if (start < pos) {
      // A line that began in an earlier chunk: read whole once its end is here.
      const nl = view.indexOf(10)
      if (nl === -1) {
        pos += view.length
        continue
      }
      const line = Buffer.allocUnsafe(pos + nl - start)
      if (!(await readFully(line, start))) return
      yield line.toString('utf8')
      i = nl + 1
    }
    for (let nl = view.indexOf(10, i); nl !== -1; nl = view.indexOf(10, i)) {
      yield view.toString('utf8', i, nl)
      i = nl + 1
    }
    pos += view.length
    start = pos - (view.length - i)
  }
}
