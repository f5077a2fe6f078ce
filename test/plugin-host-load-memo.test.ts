import { EventEmitter } from 'node:events'
import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent, type SessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { tmpRoot } from './helpers/tmp-root.js'

// The plugin remembers what a load through `plugin.persistence` returned, to continue from that
// open state when the host resumes the session (§8). A session the host closes is no longer
// held open: what its load returned must be forgotten, or every session the host
// ever looked at keeps its events for the plugin's life, and a later resume continues from a
// state that is gone (a hunt's find: the first append failed E_NOT_FOUND, flush rejected).

const meta = (id: string) => ({ id, createdAt: 1, delegationDepth: 0 })
const ev = (seq: number): SessionEvent => ({ seq, type: 'note', time: 1 + seq, data: { n: seq } })

test.each(['close', 'closeAll'] as const)('a session loaded through plugin.persistence, then %s-d, then written elsewhere and resumed: the resume adopts the log as it is now', async (how) => {
  const root = await tmpRoot()
  const other = createJsonlPersistence({ root, sync: 'none' })
  await other.create(meta('S'))
  await other.append('S', [ev(0), ev(1)])
  await other.close('S')

  const sessionEvents = new EventEmitter()
  const plugin = sessionPersistencePlugin({ root, sync: 'none', flushDelayMs: 5 })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  await plugin.apply({ sessionEvents, liveSessions: () => [] })
  await plugin.persistence.load('S') // looked at (a preview), not resumed
  if (how === 'close') await plugin.persistence.close('S')
  else await plugin.persistence.closeAll()

  await other.load('S') // another process goes on with it
  await other.append('S', [ev(2), ev(3)])
  await other.close('S')

  const seed = (await other.inspect('S')).events
  sessionEvents.emit('session/created', meta('S'), seed)
  sessionEvents.emit('session/event', 'S', ev(4))
  await plugin.flush('S')
  expect(errors).toEqual([])
  expect((await other.inspect('S')).events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
  await plugin.dispose()
})
