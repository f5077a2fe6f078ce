import type { Io } from './commands.js'
import type { OpenedRoot } from './open-root.js'
import { eventLine, shown } from './render.js'
import type { SessionEvent } from '../session/schema.js'

/**
 * `tail`: the last `lines` events, one line each, and with a `signal` (`-f`) every event
 * written after them, by any process, until the signal aborts (exit 0) or the session is deleted
 * (said on stderr, exit 0). Reads through `read` and `watch`: no lock, nothing before the last
 * `lines` events is read.
 */
export async function tail(root: OpenedRoot, io: Io, id: string, opts: { json: boolean; lines: number; signal: AbortSignal | undefined }): Promise<number> {
  const print = (e: SessionEvent) => io.out(`${opts.json ? JSON.stringify(e) : eventLine(e, io.style)}\n`)
  const range = await root.store.read(id, { last: opts.lines })
  for (const e of range.events) print(e)
  const { signal } = opts
  if (!signal) return 0
  for await (const e of root.store.watch(id, { fromSeq: range.firstSeq + range.events.length, signal })) {
    print(e)
    await io.drain?.()
  }
  if (!signal.aborted) io.err(`session '${shown(id, true)}' was deleted; stopped following\n`)
  return 0
}
