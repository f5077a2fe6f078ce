import type { RepairReport } from './core/repair-plan.js'
import type { SessionEvent, SessionMeta } from './core/schema.js'

export type { RepairReport } from './core/repair-plan.js'

/** Where a session's log lives (SPEC 4). */
export interface SessionLocation {
  kind: 'jsonl'
  path: string
}

/** What `load` and `inspect` return. */
export interface LoadedSession {
  meta: SessionMeta
  events: readonly SessionEvent[]
  /** Present when the tail needed repair (a torn tail cut, or an open final turn closed). */
  repair?: RepairReport
}

export interface SessionListing {
  meta: SessionMeta
  location: SessionLocation
  sizeBytes: number
  mtimeMs: number
}

export interface ListProblem {
  path: string
  code: string
  message: string
}

export interface LoadOptions {
  /** Default true. False adopts a session still live in a host: an open final turn stays open. */
  closeOpenTurn?: boolean
}

export interface ListOptions {
  onProblem?: (problem: ListProblem) => void
}

/**
 * The seam between a host's write path and a storage backend (SPEC 4). The plugin depends on
 * this interface only; the JSONL backend and the in-memory reference both implement it.
 */
export interface SessionPersistence {
  locate(meta: SessionMeta): SessionLocation
  create(meta: SessionMeta): Promise<void>
  append(id: string, events: readonly SessionEvent[]): Promise<void>
  load(id: string, options?: LoadOptions): Promise<LoadedSession>
  inspect(id: string): Promise<LoadedSession>
  list(options?: ListOptions): Promise<SessionListing[]>
  close(id: string): Promise<void>
}

export interface ForkChild {
  id: string
  seedLength: number
  createdAt?: number
  cwd?: string
}

export interface JsonlSessionPersistence extends SessionPersistence {
  /** The resolved absolute root. */
  readonly root: string
  fork(parentId: string, child: ForkChild): Promise<SessionMeta>
  closeAll(): Promise<void>
}
