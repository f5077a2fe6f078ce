import { execFileSync } from 'node:child_process'
import { closeSync, constants, openSync, rmSync } from 'node:fs'

/** Makes a FIFO at `path` (mkfifo(1)). */
export function mkfifo(path: string): string {
  execFileSync('mkfifo', [path])
  return path
}

/**
 * Settles with `work`'s outcome, or rejects after `ms` with "`what` did not settle": a test of
 * something that may wait on a FIFO fails instead of waiting for vitest's own timeout.
 */
export async function settlesWithin<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms (it waits on a FIFO)`)), ms)
  })
  try {
    return await Promise.race([work, late])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Releases whatever waits on the FIFOs (an open for reading waits for a writer, a read for data
 * or for the last writer to go): opens each for writing without waiting (O_RDWR never waits on
 * Linux) and closes it, every 20 ms until `pending` has settled (at most `ms`), then removes
 * them. Call it in `finally`: a thread of libuv's pool or a worker blocked on a FIFO keeps the
 * test process from exiting.
 */
export async function releaseFifos(fifos: readonly string[], pending: Promise<unknown>, ms = 5000): Promise<void> {
  let settled = false
  void pending.then(
    () => (settled = true),
    () => (settled = true),
  )
  const end = Date.now() + ms
  for (;;) {
    for (const fifo of fifos) {
      try {
        closeSync(openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK))
      } catch {
        // removed already, or not a FIFO any more
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
    if (settled || Date.now() > end) break
  }
  for (const fifo of fifos) rmSync(fifo, { force: true })
}
