import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { stillTheEvent } from '../jsonl/watch-log.js'
import type { Io } from './commands.js'
import type { OpenedRoot } from './open-root.js'
import { eventLine, oneLine, shown } from './render.js'
import type { SessionEvent } from '../session/schema.js'

/**
 * `tail`: the last `lines` events, one line each, and with a `signal` (`-f`) every event
 * written after them, by any process, until the signal aborts (exit 0) or the session is deleted
 * (said on stderr, exit 0). Reads through `read` and `watch`: no lock, nothing before the last
 * `lines` events is read. A rewrite of the log (§16) is followed; one that cut events already
 * printed (repair --truncate-at-damage) stops it: said on stderr, exit 1.
 */
export async function tail(root: OpenedRoot, io: Io, id: string, opts: { json: boolean; lines: number; signal: AbortSignal | undefined }): Promise<number> {
  const print = (e: SessionEvent) => io.out(`${opts.json ? JSON.stringify(e) : eventLine(e, io.style)}\n`)
  const range = await root.store.read(id, { last: opts.lines })
  for (const e of range.events) print(e)
  const { signal } = opts
  if (!signal) return 0
  // Watched from the last event printed (not printed again): the watch then holds the log to it,
  // so a truncation that cuts what `read` printed is caught as one that cuts what it yielded.
  const next = range.firstSeq + range.events.length
  const from = range.events.length > 0 ? next - 1 : next
  try {
    for await (const e of root.store.watch(id, { fromSeq: from, signal })) {
      if (e.seq < next) {
        // The last event printed, as the watch finds it: a rewrite between the read and the
        // watch's first look may have cut it (a redaction may only have changed its strings).
        const printed = range.events.at(-1)!
        if (!stillTheEvent(printed, e)) {
          throw new SessionPersistenceError('E_CORRUPT', `session '${shown(id, true)}' was rewritten under tail -f and no longer holds the event seq ${e.seq} it printed (events it printed were cut: repair --truncate-at-damage)`, { sessionId: id })
        }
        continue
      }
      print(e)
      await io.drain?.()
    }
  } catch (err) {
    // What was printed is no longer the session's history (a truncation cut it): said, never
    // followed on into the events written after the cut.
    if (!isSessionPersistenceError(err, 'E_CORRUPT')) throw err
    io.err(`session-jsonl: E_CORRUPT: ${oneLine(err.message, 400)}; stopped following\n`)
    return 1
  }
  if (!signal.aborted) io.err(`session '${shown(id, true)}' was deleted; stopped following\n`)
  return 0
}
