import type { LoadedSession } from '../persistence.js'
import { writeFlags } from './durable.js'
import { LogWriter } from './log-writer.js'
import { metaFromHeader } from '../session/meta.js'
import { prepareBatch } from '../session/prepare-batch.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'
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
    /**
     * Confirms the writer lock before the repair writes anything (the writer lock's lease:
     * reading a large log may outlast it, and a lock lost meanwhile must cut nothing).
     */
    beforeWrite?: () => Promise<void> | undefined
  },
): Promise<{ writer: LogWriter; loaded: LoadedSession }> {
  const handle = await ctx.fs.open(path, writeFlags(ctx, 'r+'))
  const writer = new LogWriter(ctx, id, path, handle, 0)
  try {
    const scan = await scanLog(handle, { path, sessionId: id })
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: options.closeOpenTurn })
    writer.size = scan.size
    if (plan.truncateAt !== undefined || plan.closers.length > 0) await options.beforeWrite?.()
    if (plan.truncateAt !== undefined) await writer.truncate(plan.truncateAt)
    if (plan.closers.length > 0) await writer.append(prepareBatch(id, plan.closers).bytes)
    const events = plan.closers.length > 0 ? [...scan.events, ...plan.closers] : scan.events
    const loaded: LoadedSession = { meta: metaFromHeader(scan.header), events, firstSeq: 0 }
    if (plan.report) loaded.repair = { persisted: true, ...plan.report }
    return { writer, loaded }
  } catch (err) {
    await writer.close().catch(() => {})
    throw err
  }
}
