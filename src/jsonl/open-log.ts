import type { LoadedSession } from '../persistence.js'
import type { FormatVersion } from '../session/line-codec.js'
import { writeFlags } from './durable.js'
import { LogWriter } from './log-writer.js'
import { metaFromHeader } from '../session/meta.js'
import { prepareBatch } from '../session/prepare-batch.js'
import { planRepair } from './repair-plan.js'
import { type LogScan, scanLog } from './scan-log.js'
import type { FileHandle } from './fs/file-system.js'
import { findLogTail } from './log-tail.js'
import { tailStartWithin } from '../session/tail-start.js'
import { readHeaderLine } from './read-session.js'
import type { StoreContext } from './store-context.js'

/**
 * Opens a log for appends, the way `load` does: validates it, and when its tail needs repair,
 * cuts it and appends the closers durably (docs/contract.md §6). The caller holds the lock.
 * Resolves with the writer, positioned after the last event, and what the load returns.
 */
export async function openLog(
  ctx: StoreContext,
  id: string,
  path: string,
  options: {
    closeOpenTurn: boolean
    /** `'last-compaction'`: read only the tail a resume needs (§15.1). */
    from?: 'start' | 'last-compaction'
    /**
     * Confirms the writer lock before the repair writes anything (the writer lock's lease:
     * reading a large log may outlast it, and a lock lost meanwhile must cut nothing).
     */
    beforeWrite?: () => Promise<void> | undefined
  },
): Promise<{ writer: LogWriter; loaded: LoadedSession; version: FormatVersion }> {
  const handle = await ctx.fs.open(path, writeFlags(ctx, 'r+'))
  // Found, not published by this instance: its name is made durable before the first append.
  const writer = new LogWriter(ctx, id, path, handle, 0, false)
  try {
    const { scan, firstSeq } = await scanForLoad(handle, id, path, options.from ?? 'start')
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: options.closeOpenTurn })
    writer.size = scan.size
    if (plan.truncateAt !== undefined || plan.closers.length > 0) await options.beforeWrite?.()
    if (plan.truncateAt !== undefined) await writer.truncate(plan.truncateAt)
    if (plan.closers.length > 0) await writer.append(prepareBatch(id, plan.closers, scan.header.version).bytes)
    const kept = firstSeq > 0 ? scan.events.slice(firstSeq - (scan.events[0]?.seq ?? firstSeq)) : scan.events
    const events = plan.closers.length > 0 ? [...kept, ...plan.closers] : kept
    const loaded: LoadedSession = { meta: metaFromHeader(scan.header), events, firstSeq }
    if (plan.report) loaded.repair = { persisted: true, ...plan.report }
    return { writer, loaded, version: scan.header.version }
  } catch (err) {
    await writer.close().catch(() => {})
    throw err
  }
}

/**
 * The scan a load repairs from: the whole log, or for `'last-compaction'` only its tail (§15.1).
 * A tail whose scan meets a defect at or before a marker line it relied on is not trusted (that
 * line may be cut), nor one whose events decide another start; the whole log is scanned instead,
 * as is a log with no compaction in force.
 */
async function scanForLoad(handle: FileHandle, id: string, path: string, from: 'start' | 'last-compaction'): Promise<{ scan: LogScan; firstSeq: number }> {
  if (from === 'last-compaction') {
    // Concurrently: two thread-pool round trips in the time of one.
    const [{ header, headerBytes }, { size }] = await Promise.all([readHeaderLine(handle, path, id), handle.stat()])
    const tail = await findLogTail(handle, headerBytes, size, header.version)
    if (tail && tail.firstSeq > 0) {
      const scan = await scanLog(handle, { path, sessionId: id, start: { ...tail.start, header, headerBytes } })
      // Trusted when no defect can have cut a marker line it used, and when the events read
      // decide the same start (a marker line the search did not recognize would change it).
      const trusted = (!scan.defect || scan.defect.byteOffset > tail.newestMarker) && tailStartWithin(scan.events) === tail.firstSeq
      if (trusted) return { scan, firstSeq: tail.firstSeq }
    }
  }
  return { scan: await scanLog(handle, { path, sessionId: id }), firstSeq: 0 }
}
