import type { Io } from './commands.js'
import { makeStyle } from './render.js'

/** The part of a stream the CLI writes to (process.stdout and process.stderr, or a test's fake). */
export interface OutputStream {
  write(s: string): unknown
  readonly isTTY?: boolean
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
