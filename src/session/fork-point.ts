import { SessionPersistenceError } from '../errors.js'
import type { ForkChild } from '../persistence.js'
import { asObject } from './as-object.js'
import { validateMeta } from './meta.js'
import type { SessionEvent, SessionHeader, SessionMeta } from './schema.js'

/** `E_INVALID_META` unless `child` is an object whose `seedLength` is a non-negative integer. */
export function assertSeedLength(child: ForkChild): void {
  if (asObject(child) === undefined) {
    throw new SessionPersistenceError('E_INVALID_META', 'the fork child must be an object { id, seedLength, … }')
  }
  const { seedLength } = child
  if (!Number.isSafeInteger(seedLength) || seedLength < 0) {
    throw new SessionPersistenceError('E_INVALID_META', `seedLength must be a non-negative integer`, {
      sessionId: child.id,
    })
  }
}

/**
 * The child's meta, once the fork point is checked against the parent's valid events:
 * `E_BAD_FORK_POINT` past the end, or not `0` and not just after a `turn/end`.
 */
export function forkMeta(
  parent: { id: string; path: string; scan: { events: readonly SessionEvent[]; header: SessionHeader } },
  child: ForkChild,
): SessionMeta {
  const { events, header } = parent.scan
  return forkMetaAt({ id: parent.id, path: parent.path, header, stored: events.length, seedEndType: events[child.seedLength - 1]?.type }, child)
}

/**
 * As `forkMeta`, from what a scan that keeps no event noted (§15.5): how many valid events the
 * parent has (`stored`) and the type of event `seedLength - 1` (`seedEndType`, when there is one).
 */
export function forkMetaAt(
  parent: { id: string; path: string; header: SessionHeader; stored: number; seedEndType: string | undefined },
  child: ForkChild,
): SessionMeta {
  const { seedLength } = child
  const { stored, header } = parent
  if (seedLength > stored || (seedLength > 0 && parent.seedEndType !== 'turn/end')) {
    throw new SessionPersistenceError(
      'E_BAD_FORK_POINT',
      seedLength > stored
        ? `session '${parent.id}' has ${stored} valid events; cannot fork at ${seedLength}`
        : `event ${seedLength - 1} of session '${parent.id}' is not a turn/end; fork at 0 or just after a turn/end`,
      { sessionId: parent.id, path: parent.path },
    )
  }
  return childMeta(parent.id, header, child)
}

/**
 * The meta of a fork's child: its own id and createdAt (now unless given), the parent's `cwd`
 * unless given, `parentSession`, `seedLength` and the parent's `delegationDepth`. Every backend
 * builds it here.
 */
export function childMeta(parentId: string, parent: { cwd?: string | undefined; delegationDepth: number }, child: ForkChild): SessionMeta {
  const cwd = child.cwd ?? parent.cwd
  return validateMeta({
    id: child.id,
    createdAt: child.createdAt ?? Date.now(),
    ...(cwd === undefined ? {} : { cwd }),
    parentSession: parentId,
    seedLength: child.seedLength,
    delegationDepth: parent.delegationDepth,
  })
}
