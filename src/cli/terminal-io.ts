import type { Io } from './commands.js'
import { makeStyle } from './render.js'

/** The part of a stream the CLI writes to (process.stdout and process.stderr, or a test's fake). */
export interface OutputStream {
  write(s: string): unknown
  readonly isTTY?: boolean
  /** True while the stream holds more than it wants (process.stdout on a slow pipe). */
  readonly writableNeedDrain?: boolean
  once?(event: 'drain', listener: () => void): unknown
}

/** Resolves once `stream` has written out what it holds (at once when it holds little). */
function drained(stream: OutputStream): Promise<void> {
  if (!stream.writableNeedDrain || !stream.once) return Promise.resolve()
  return new Promise((resolve) => stream.once!('drain', resolve))
}

/**
 * The binary's `Io`: colours only on a terminal and without NO_COLOR; a progress line on stderr
 * only when stderr is a terminal, rewritten in place and wiped before any other output (so
 * the lines `prune` and `copy` print never land on the end of a bar) and when the work is done.
 */
export function terminalIo(stdout: OutputStream, stderr: OutputStream, env: NodeJS.ProcessEnv): Io {
  let drawn = false
  const wipe = () => {
    if (drawn) stderr.write('\r\u001b[K')
    drawn = false
  }
  return {
    out: (s) => {
      wipe()
      stdout.write(s)
    },
    err: (s) => {
      wipe()
      stderr.write(s)
    },
    drain: () => drained(stdout),
    style: makeStyle(stdout.isTTY === true && !('NO_COLOR' in env)),
    progress:
      stderr.isTTY === true
        ? (what, done, total) => {
            if (done >= total) return wipe()
            if (total > 100 && done % Math.ceil(total / 100) !== 0) return // about a hundred redraws at most
            const width = 30
            const filled = Math.round((done / total) * width)
            stderr.write(`\r${what} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`)
            drawn = true
          }
        : undefined,
  }
}
