// The plugin: its cost on the host's call path, and end-to-end durable throughput.
import { EventEmitter } from 'eventemitter3'
import { createJsonlPersistence, sessionPersistencePlugin } from '../../dist/index.js'
import { cleanup, event, events, median, now, scratch } from '../lib.mjs'

/** ns per event of `session/event` with the plugin subscribed, and with a no-op listener. */
export async function handlerRun(total, block = 1000) {
  const root = scratch('handler')
  try {
    const host = { sessionEvents: new EventEmitter(), liveSessions: () => [] }
    const plugin = sessionPersistencePlugin({ root, flushDelayMs: 60_000 })
    plugin.on('error', () => {})
    await plugin.apply(host)
    const meta = { id: 'hot', createdAt: 1, delegationDepth: 0 }
    host.sessionEvents.emit('session/created', meta, [])
    const evs = Array.from({ length: total }, (_, i) => Object.freeze(event(i)))
    const perBlock = []
    for (let i = 0; i < total; i += block) {
      const t = process.hrtime.bigint()
      for (let j = i; j < i + block; j++) host.sessionEvents.emit('session/event', 'hot', evs[j])
      perBlock.push(Number(process.hrtime.bigint() - t) / block)
    }
    const noop = new EventEmitter()
    noop.on('session/event', () => {})
    const perBlockNoop = []
    for (let i = 0; i < total; i += block) {
      const t = process.hrtime.bigint()
      for (let j = i; j < i + block; j++) noop.emit('session/event', 'hot', evs[j])
      perBlockNoop.push(Number(process.hrtime.bigint() - t) / block)
    }
    await plugin.dispose()
    return { nsPerEvent: median(perBlock), nsPerEventNoop: median(perBlockNoop) }
  } finally {
    cleanup(root)
  }
}

/**
 * Turns of 10 events through the plugin (durable at each turn end: emit, then await flush) vs
 * `append` of the same batches on another session, interleaved turn by turn so both see the
 * same disk conditions.
 */
export async function endToEndRun(turns) {
  const root = scratch('e2e')
  try {
    const mk = (id) => ({ id, createdAt: 1, delegationDepth: 0 })
    const turnEvents = (t) => {
      const evs = events(t * 10, 10)
      evs[0] = { seq: t * 10, type: 'turn/start', time: 1, data: { turn: t } }
      evs[9] = { seq: t * 10 + 9, type: 'turn/end', time: 1, data: { turn: t, reason: { kind: 'completed' } } }
      return evs
    }
    const all = Array.from({ length: turns + 1 }, (_, t) => turnEvents(t))
    const p = createJsonlPersistence({ root })
    await p.create(mk('direct'))
    await p.append('direct', all[0])
    const host = { sessionEvents: new EventEmitter(), liveSessions: () => [] }
    const plugin = sessionPersistencePlugin({ root })
    await plugin.apply(host)
    host.sessionEvents.emit('session/created', mk('plugin'), all[0])
    await plugin.flush('plugin')
    let direct = 0
    let viaPlugin = 0
    for (let i = 1; i <= turns; i++) {
      let t = now()
      await p.append('direct', all[i])
      direct += now() - t
      t = now()
      for (const e of all[i]) host.sessionEvents.emit('session/event', 'plugin', e)
      await plugin.flush('plugin')
      viaPlugin += now() - t
    }
    await p.closeAll()
    await plugin.dispose()
    return { direct: (turns * 10) / (direct / 1000), viaPlugin: (turns * 10) / (viaPlugin / 1000), ratio: direct / viaPlugin }
  } finally {
    cleanup(root)
  }
}
