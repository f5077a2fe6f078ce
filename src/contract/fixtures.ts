import type { SessionEvent, SessionMeta } from '../session/schema.js'
import { type ErrorCode, isSessionPersistenceError } from '../errors.js'
import type { SessionPersistence, SessionStore } from '../persistence.js'

/** What every part of the conformance suite gets from `runPersistenceContract`. */
export interface ContractContext {
  /** Opens another instance over the current test's store (a restart, or a second process). */
  open(): Promise<SessionPersistence>
  /** Opens an instance over a second, empty store of the same backend (a copy's target). */
  openOther(): Promise<SessionPersistence>
}

export const T0 = 1_700_000_000_000

export function meta(id: string, extra: Partial<SessionMeta> = {}): SessionMeta {
  return { id, createdAt: T0, delegationDepth: 0, ...extra }
}

export function ev(seq: number, type: string, data?: SessionEvent['data']): SessionEvent {
  return data === undefined ? { seq, type, time: T0 + seq } : { seq, type, time: T0 + seq, data }
}

export function completeTurn(seq: number, turn: number): SessionEvent[] {
  return [
    ev(seq, 'turn/start', { turn }),
    ev(seq + 1, 'user/message', { content: `question ${turn}` }),
    ev(seq + 2, 'assistant/message', { turn, step: 0, content: [{ type: 'text', text: `answer ${turn}` }] }),
    ev(seq + 3, 'turn/end', { turn, reason: { kind: 'completed' } }),
  ]
}

export async function codeOf(promise: Promise<unknown>): Promise<ErrorCode | 'resolved' | 'foreign error'> {
  try {
    await promise
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : 'foreign error'
  }
}

export function codeOfSync(fn: () => unknown): ErrorCode | 'returned' | 'foreign error' {
  try {
    fn()
    return 'returned'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : 'foreign error'
  }
}

/** A stored session with one complete turn, closed again (not held by anyone). */
export async function storedSession(p: SessionPersistence, id: string, turns = 1, extra: Partial<SessionMeta> = {}): Promise<SessionEvent[]> {
  await p.create(meta(id, extra))
  const events = Array.from({ length: turns }, (_, i) => completeTurn(i * 4, i + 1)).flat()
  await p.append(id, events)
  await p.close(id)
  return events
}

/** True when the instance is a full backend (fork, closeAll, raw transfer), as both built-in ones are. */
export function isStore(p: SessionPersistence): p is SessionStore {
  const s = p as Partial<SessionStore>
  return typeof s.fork === 'function' && typeof s.closeAll === 'function' && typeof s.readRaw === 'function' && typeof s.importRaw === 'function'
}

/** The kinds of `SessionLocation`: a location is checked by its kind only, never by its shape. */
export const LOCATION_KINDS: readonly string[] = ['jsonl', 'postgres']
