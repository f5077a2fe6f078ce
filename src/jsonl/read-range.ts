import type { FileHandle } from './fs/file-system.js'

/** Bytes `[from, to)` of an open file; `EIO` if it is shorter than that (it shrank while being read). */
export async function readBytes(handle: FileHandle, path: string, from: number, to: number): Promise<Buffer> {
  const buf = Buffer.alloc(to - from)
  let done = 0
  while (done < buf.length) {
    const n = await handle.read(buf, done, buf.length - done, from + done)
    if (n === 0) throw Object.assign(new Error(`${path} shrank while it was being read`), { code: 'EIO' })
    done += n
  }
  return buf
}
