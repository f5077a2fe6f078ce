import { ioError } from '../errors.js'
import { OpenTurnTracker } from '../session/closers.js'
import { encodeSessionId } from '../session/id-encoding.js'
import type { SessionEvent, SessionHeader } from '../session/schema.js'
import { findOneLog } from './find-logs.js'
import type { FileSystem } from './fs/file-system.js'
import { planRepair, type RepairReport } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import { createStoreContext } from './store-context.js'

/** What `inspect` of a log would say of it, without its events (`verify`, §15.5). */
export interface LogCheck {
  header: SessionHeader
  /** Valid events in the log (closers not counted): `inspect`'s events less its closers. */
  events: number
  /** The repair a load would make (`inspect`'s `repair`), undefined when there is none. */
  repair: Omit<RepairReport, 'persisted'> | undefined
}

/**
 * Checks the log of `id` under the JSONL root `root` as `inspect` reads it (the same lookup, the
 * same scan, the same repair plan and the same errors: `E_CORRUPT`, `E_FORMAT_UNSUPPORTED`,
 * `E_NOT_FOUND`, `E_AMBIGUOUS`, `E_IO`), in one pass that keeps no event: memory does not grow
 * with the log's size. Read-only, no lock taken.
 */
export async function checkLog(root: string, id: string, options: { fs?: FileSystem } = {}): Promise<LogCheck> {
  const { ctx } = createStoreContext({ root, ...(options.fs ? { fs: options.fs } : {}) })
  encodeSessionId(id)
  try {
    const path = await findOneLog(ctx, id)
    const handle = await ctx.fs.open(path, 'r')
    try {
      const openTurn = new OpenTurnEvents()
      const scan = await scanLog(handle, { path, sessionId: id, keepEvents: false, onEventLine: (_buf, _start, _end, event) => openTurn.add(event) })
      const plan = planRepair({ ...scan, events: openTurn.events() }, { path, sessionId: id, closeOpenTurn: true })
      return { header: scan.header, events: scan.eventCount, repair: plan.report }
    } finally {
      await handle.close()
    }
  } catch (err) {
    throw ioError(err, `inspect session '${id}'`) // as inspect words it
  }
}

/**
 * The turn open at the end of a log, followed with the shared `OpenTurnTracker`, and the last
 * event's seq and time. `events()` gives the few events from which `computeClosers` computes the
 * closers it would compute from the whole log. What it holds grows with the open turn's tool
 * calls (their ids), not with the log's bytes.
 */
class OpenTurnEvents extends OpenTurnTracker {
  #lastSeq = 0
  #lastTime = 0

  override add(event: SessionEvent): void {
    this.#lastSeq = event.seq
    this.#lastTime = event.time
    super.add(event)
  }

  /**
   * The open turn as events that `findOpenTurn` reads back into the same turn, step and pending
   * calls (every value given, none left to a fallback), then an event of no type it looks at
   * with the last event's seq and time; none when no turn is open.
   */
  events(): SessionEvent[] {
    const open = this.openTurn()
    if (!open) return []
    const at = { seq: this.#lastSeq, time: this.#lastTime }
    const events: SessionEvent[] = [{ ...at, type: 'turn/start', data: { turn: open.turn } }]
    if (open.step) events.push({ ...at, type: 'step/start', data: { turn: open.step.turn, step: open.step.step } })
    for (const p of open.pending) events.push({ ...at, type: 'tool/call', data: { callId: p.callId, turn: p.turn, step: p.step } })
    events.push({ ...at, type: 'log/check-last' })
    return events
  }
}
