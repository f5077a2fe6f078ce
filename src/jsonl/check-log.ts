import { ioError } from '../errors.js'
import { OpenTurnTracker } from '../session/closers.js'
import { encodeSessionId } from '../session/id-encoding.js'
import type { SessionEvent, SessionHeader } from '../session/schema.js'
import { findOneLog } from './find-logs.js'
import type { FileSystem } from './fs/file-system.js'
import { planRepair, type RepairReport } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import { readHeaderLine } from './read-session.js'
import type { FormatVersion } from '../session/line-codec.js'
import { createStoreContext, type StoreContext } from './store-context.js'

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
  try {
    return await checkLogIn(ctx, id)
  } catch (err) {
    throw ioError(err, `inspect session '${id}'`) // as inspect words it
  }
}

/**
 * `checkLog` in a store's own context (a `migrate` dry run), its errors unwrapped; with the log's
 * path. `onEvent` is told each valid event as it is read, and may refuse it by throwing.
 */
export async function checkLogIn(
  ctx: StoreContext,
  id: string,
  options: {
    onEvent?: (event: SessionEvent, path: string) => void
    /** Told each valid event line's bytes as they are in the file, its event and the log's version; may refuse it by throwing. */
    onEventLine?: (buf: Buffer, start: number, end: number, event: SessionEvent, path: string, version: FormatVersion) => void
  } = {},
): Promise<LogCheck & { path: string }> {
  encodeSessionId(id)
  const path = await findOneLog(ctx, id)
  const handle = await ctx.fs.open(path, 'r')
  try {
    // The open turn followed event by event: what it keeps grows with that turn's pending
    // calls, not with the log.
    const openTurn = new OpenTurnTracker()
    const { onEvent, onEventLine } = options
    const version = onEventLine ? (await readHeaderLine(handle, path, id)).header.version : 0
    const scan = await scanLog(handle, {
      path,
      sessionId: id,
      keepEvents: false,
      onEvent: (event) => {
        onEvent?.(event, path)
        openTurn.add(event)
      },
      ...(onEventLine ? { onEventLine: (buf: Buffer, start: number, end: number, event: SessionEvent) => onEventLine(buf, start, end, event, path, version) } : {}),
    })
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true, openTurn })
    return { header: scan.header, events: scan.eventCount, repair: plan.report, path }
  } finally {
    await handle.close()
  }
}
