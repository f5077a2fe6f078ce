import { createHash } from 'node:crypto'
import type { SessionEvent } from '../session/schema.js'

/**
 * A running digest of a session's events: the agent reports it with every acknowledged flush,
 * and the checker recomputes it from the log. Equal digests mean the acknowledged events are
 * present and unchanged (a stored line is JSON.stringify of the event, which round-trips).
 */
export class HashChain {
  #hash = ''
  count = 0

  add(event: SessionEvent): void {
    this.#hash = createHash('sha256').update(this.#hash).update(JSON.stringify(event)).digest('hex')
    this.count++
  }

  get digest(): string {
    return this.#hash
  }

  static of(events: readonly SessionEvent[], count = events.length): HashChain {
    const chain = new HashChain()
    for (let i = 0; i < count; i++) chain.add(events[i]!)
    return chain
  }
}
