import { SessionPersistenceCorruptionError } from '../errors.js'
import { computeClosers, type OpenTurnTracker } from '../session/closers.js'
import type { LogScan } from './scan-log.js'
import type { SessionEvent } from '../session/schema.js'

/** What a repair cut and wrote (docs/contract.md §4). */
export interface RepairReport {
  persisted: boolean
  truncatedAtByte?: number
  droppedBytes: number
  droppedLines: number
  droppedTurnEnds: number
  reason?: string
  closers: readonly SessionEvent[]
}

export interface RepairPlan {
  /** Keep bytes `[0, keepBytes)`. */
  keepBytes: number
  /** Defined when the file's tail must be cut. */
  truncateAt: number | undefined
  closers: SessionEvent[]
  report: Omit<RepairReport, 'persisted'> | undefined
}

/**
 * Decides between "fine", "repair the torn tail" and "refuse" (docs/contract.md §6, rules 3–4). Throws E_CORRUPT
 * when the first defect lies at or before the commit boundary, unless it holds a NUL byte.
 */
export function planRepair(
  scan: LogScan,
  context: {
    path: string
    sessionId?: string
    closeOpenTurn: boolean
    /** The open turn followed during a scan that kept no event (§15.5): the closers come from it, not from `scan.events`. */
    openTurn?: OpenTurnTracker
  },
): RepairPlan {
  const { defect, damage } = scan
  if (defect && !defect.hasNul && scan.commitLine !== undefined && defect.line <= scan.commitLine) {
    throw new SessionPersistenceCorruptionError(defect.line, defect.byteOffset, defect.reason, {
      path: context.path,
      sessionId: context.sessionId,
    })
  }
  // Version 1: a line after the first defect that fails its checksum refuses the log (§16).
  if (damage) {
    throw new SessionPersistenceCorruptionError(damage.line, damage.byteOffset, damage.reason, { path: context.path, sessionId: context.sessionId })
  }
  const createdAt = scan.header.createdAt
  const closers = !context.closeOpenTurn ? [] : context.openTurn ? context.openTurn.closers(createdAt) : computeClosers(scan.events, createdAt)
  if (!defect && closers.length === 0) {
    return { keepBytes: scan.size, truncateAt: undefined, closers, report: undefined }
  }
  const report: Omit<RepairReport, 'persisted'> = defect
    ? {
        truncatedAtByte: defect.byteOffset,
        droppedBytes: scan.size - defect.byteOffset,
        droppedLines: scan.droppedLines,
        droppedTurnEnds: defect.hasNul ? scan.droppedTurnEnds : 0,
        reason: defect.reason,
        closers,
      }
    : { droppedBytes: 0, droppedLines: 0, droppedTurnEnds: 0, closers }
  return { keepBytes: scan.validEnd, truncateAt: defect?.byteOffset, closers, report }
}
