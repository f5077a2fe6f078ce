import { describe, expect, test } from 'vitest'
import {
  createJsonlPersistence,
  type SessionEvent,
  type SessionMeta,
  type SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createFaultInjectingFileSystem, createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { codesOf, hangingBackend } from './helpers/hanging-backend.js'
import { tmpRoot } from './helpers/tmp-root.js'

// docs/plugin.md (Deadlines), SPEC 8: after `dispose({ timeoutMs })` timed out on a hung
// backend, the write in flight completes and the session is closed; that is the only I/O
// after it, and nothing more is reported. The events buffered behind the hung batch were
// named in dispose's E_TIMEOUT and are not written later.

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (err: unknown) => err,
  )
}

/** A plugin over `persistence` with a reference host, its reported errors, and session `id` with one turn begun and flushed. */
async function pluginWithSession(config: Parameters<typeof sessionPersistencePlugin>[0], id: string) {
  const plugin = sessionPersistencePlugin(config)
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost({ cwd: '/project' })
  await plugin.apply(host)
  const s = host.startSession({ id })
  s.beginTurn('hi')
  await plugin.flush(id)
  return { plugin, errors, s }
}

describe('after a timed-out dispose', () => {
  test('no append is issued once the backend answers: the in-flight batch lands, the events behind it do not', async () => {
    const mem = hangingBackend()
    const { plugin, errors, s } = await pluginWithSession({ persistence: mem.backend, flushDelayMs: 10_000 }, 's1')
    const durable = s.events.length

    const hung = mem.hang('append', 's1')
    const hungEvent = s.emit('x', { n: 'in flight' })
    const hungFlush = rejection(plugin.flush('s1'))
    await hung.started
    const behind = s.emit('x', { n: 'buffered behind' })

    const error = await rejection(plugin.dispose({ timeoutMs: 100 }))
    expect(codesOf(error)).toEqual(['s1:E_TIMEOUT'])
    const errorsAtSettle = errors.length

    hung.release()
    // A dispose without a deadline settles over the same disposal: when every drain and close has
    // ended. It names the session too: the event behind the hung write was never written.
    expect(codesOf(await rejection(plugin.dispose()))).toEqual(['s1:E_TIMEOUT'])
    expect(await hungFlush).toBeUndefined()

    // Every append the plugin issued, the backend answered by now: none after the one in flight.
    expect(mem.issued).toEqual([
      { id: 's1', seqs: s.events.slice(0, durable).map((e) => e.seq) },
      { id: 's1', seqs: [hungEvent.seq] },
    ])
    const stored = await createMemoryPersistence({ store: mem.store }).inspect('s1')
    const real = stored.events.slice(0, stored.events.length - (stored.repair?.closers.length ?? 0))
    expect(real.map((e) => e.seq)).toEqual([...s.events.slice(0, durable).map((e) => e.seq), hungEvent.seq])
    expect(real.map((e) => e.seq)).not.toContain(behind.seq)
    expect(errors.slice(errorsAtSettle)).toEqual([])
  })

  test('over JSONL with a datasync that hangs: no error is reported after dispose settled, and the disk holds exactly the hung batch', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const { plugin, errors, s } = await pluginWithSession({ root, fs, flushDelayMs: 10_000 }, 'disk')

    const waiting: (() => void)[] = []
    let started = () => {}
    const inFlight = new Promise<void>((r) => (started = r))
    const stop = fs.inject({
      op: ['datasync', 'sync'],
      before: () =>
        new Promise<void>((r) => {
          waiting.push(r)
          started()
        }),
    })
    const hungEvent = s.emit('x', { n: 'in flight' })
    const hungFlush = rejection(plugin.flush('disk'))
    await inFlight
    s.emit('x', { n: 'buffered behind' })

    const error = await rejection(plugin.dispose({ timeoutMs: 100 }))
    expect(codesOf(error)).toEqual(['disk:E_TIMEOUT'])
    const errorsAtSettle = errors.length
    const mutatingAtSettle = fs.calls.length

    stop()
    for (const r of waiting.splice(0)) r()
    await rejection(plugin.dispose())
    expect(await hungFlush).toBeUndefined()

    expect(errors.slice(errorsAtSettle)).toEqual([])
    const stored = await createJsonlPersistence({ root }).inspect('disk')
    expect(stored.repair?.closers ?? []).toHaveLength(1) // the open turn is closed on read, not on disk
    const onDisk = stored.events.slice(0, stored.events.length - 1)
    expect(onDisk).toEqual(s.events.slice(0, hungEvent.seq + 1))
    // After the settle only the hung write's own completion and the close ran: no write of another batch.
    const late = fs.calls.slice(mutatingAtSettle).filter((c) => c.op === 'write')
    expect(late).toEqual([])
  })
})

describe('exotic host input is reported, never thrown into the host', () => {
  const meta = (id: string): SessionMeta => ({ id, createdAt: 1, delegationDepth: 0 })

  async function setup() {
    const mem = createMemoryPersistence()
    const plugin = sessionPersistencePlugin({ persistence: mem, flushDelayMs: 10_000 })
    const errors: SessionPersistenceError[] = []
    plugin.on('error', (e) => errors.push(e))
    const host = createReferenceHost()
    await plugin.apply(host)
    return { mem, plugin, errors, host }
  }

  test('session/created with a meta that cannot be read (a revoked Proxy): E_INVALID_META, not tracked', async () => {
    const { plugin, errors, host } = await setup()
    const r = Proxy.revocable({}, {})
    r.revoke()
    expect(() => host.sessionEvents.emit('session/created', r.proxy as SessionMeta, [])).not.toThrow()
    expect(errors.map((e) => e.code)).toEqual(['E_INVALID_META'])
    await plugin.dispose()
  })

  test('session/created after dispose with a meta that cannot be read: reported, not thrown', async () => {
    const { plugin, errors, host } = await setup()
    // Keep the subscription: emit through the listener the plugin registered before dispose.
    const listener = host.sessionEvents.listeners('session/created')[0]!
    await plugin.dispose()
    const r = Proxy.revocable({}, {})
    r.revoke()
    expect(() => listener(r.proxy as SessionMeta, [])).not.toThrow()
    expect(errors.map((e) => e.code)).toEqual(['E_DISPOSED'])
  })

  test('a seed that cannot be read (its length throws): refused like a seed that is not an array, not tracked, nothing written', async () => {
    const { mem, plugin, errors, host } = await setup()
    const seed = new Proxy([] as SessionEvent[], {
      get(target, key) {
        if (key === 'length') throw new Error('length unreadable')
        return Reflect.get(target, key) as unknown
      },
    })
    expect(() => host.sessionEvents.emit('session/created', meta('c'), seed)).not.toThrow()
    expect(errors.map((e) => [e.code, e.sessionId])).toEqual([['E_INVALID_META', 'c']])
    await expect(plugin.flush('c')).rejects.toMatchObject({ code: 'E_NOT_FOUND' })
    await plugin.dispose()
    expect(await mem.list()).toEqual([])
  })
})
