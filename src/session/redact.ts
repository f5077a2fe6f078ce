import { SessionPersistenceError } from '../errors.js'
import type { SessionEvent } from './schema.js'

/**
 * The events as a backend's configured `redact` returns them (§16), checked to keep their seq;
 * a redactor that throws or changes a seq refuses the batch (`E_INVALID_EVENT`), writing
 * nothing. Shared by the JSONL and PostgreSQL backends. Without a redactor (or given something
 * that is not an array, for the batch's own validation to refuse) the events are returned as given.
 */
export function redactEvents(
  id: string,
  events: readonly SessionEvent[],
  redact: ((event: SessionEvent) => SessionEvent) | undefined,
): readonly SessionEvent[] {
  if (!redact || !Array.isArray(events)) return events
  return events.map((event, i) => {
    let out: SessionEvent
    try {
      out = redact(event)
    } catch (err) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `redact threw for event ${i} of the batch: ${String(err)}`, { sessionId: id, cause: err })
    }
    if (out?.seq !== event?.seq) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `redact changed the seq of event ${i} of the batch`, { sessionId: id })
    }
    return out
  })
}
