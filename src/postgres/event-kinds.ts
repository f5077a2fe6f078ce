import { TAIL_MARKER_TYPES } from '../session/tail-start.js'

/**
 * The `kind` column of `events` (schema version 3): which of the event types that decide where
 * a load from the last compaction starts (§15.1) a line holds, 0 for any other type. Stored
 * codes: never renumbered.
 */
export const EVENT_KINDS = {
  'turn/start': 1,
  'turn/end': 2,
  'request/header': 3,
  'history/compact': 4,
  'history/rewind': 5,
} as const satisfies Record<(typeof TAIL_MARKER_TYPES)[number], number>

export type MarkerType = keyof typeof EVENT_KINDS

/** Kinds at or above this one are the history markers (compactions and rewinds), walked newest first. */
export const FIRST_HISTORY_KIND = EVENT_KINDS['history/compact']

const BY_TYPE = new Map<string, number>(Object.entries(EVENT_KINDS))

/** The kind stored for an event of `type`. */
export function kindOf(type: string): number {
  return BY_TYPE.get(type) ?? 0
}
