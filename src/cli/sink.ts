import { type FileHandle, open, stat } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import type { Io } from './commands.js'

/** Where a streamed view writes: text is held until `flush` (or about 64 KiB), then written with back-pressure. */
export interface Sink {
  write(text: string): void
  /** Writes what is held and waits until the destination has taken it. */
  flush(): Promise<void>
  /** Flushes and releases the destination. */
  close(): Promise<void>
}

const HOLD_BYTES = 64 * 1024

function holding(writeOut: (text: string) => Promise<void>, done: () => Promise<void>): Sink {
  let held: string[] = []
  let size = 0
  let pending = Promise.resolve()
  const flush = () => {
    if (held.length > 0) {
      const text = held.join('')
      held = []
      size = 0
      pending = pending.then(() => writeOut(text))
      pending.catch(() => {}) // reported by the next flush or close, which awaits it
    }
    return pending
  }
  return {
    write(text) {
      held.push(text)
      size += text.length
      if (size >= HOLD_BYTES) void flush()
    },
    flush,
    close: async () => {
      try {
        await flush()
      } finally {
        await done()
      }
    },
  }
}

/** Standard output, through the CLI's `Io`. */
export function ioSink(io: Io): Sink {
  return holding(
    async (text) => {
      io.out(text)
      await io.drain?.()
    },
    async () => {},
  )
}

/** A file, created or truncated (its directory must exist). */
export async function fileSink(path: string): Promise<Sink> {
  await stat(dirname(resolve(path)))
  const handle: FileHandle = await open(path, 'w')
  return holding(
    async (text) => {
      await handle.write(text)
    },
    () => handle.close(),
  )
}
