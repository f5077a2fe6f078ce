import { describe, expect, test } from 'vitest'
import {
  createJsonlPersistence,
  isSessionPersistenceError,
  type SessionEvent,
  type SessionMeta,
  type SessionPersistence,
  type SessionPersistenceError,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createFaultInjectingFileSystem, createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { codesOf, hangingBackend } from './helpers/hanging-backend.js'
import { oneTurn } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

// SPEC 8 (v0.3): flush and dispose with { timeoutMs } reject with E_TIMEOUT once the deadline
// passes without the backend answering; nothing acknowledged is lost once it answers again.
// Timing bounds are generous on purpose: the machine is shared.

const DEADLINE = 300
const LATE = 5_000 // a deadline must fire long before this

async function timed<T>(p: Promise<T>): Promise<{ ms: number; error: unknown }> {
  const t0 = performance.now()
  try {
    await p
    return { ms: performance.now() - t0, error: undefined }
  } catch (error) {
    return { ms: performance.now() - t0, error }
  }
}


async function setup(flushDelayMs = 10_000) {
  const hb = hangingBackend()
  const plugin = sessionPersistencePlugin({ persistence: hb.backend, flushDelayMs })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost({ cwd: '/project' })
  await plugin.apply(host)
  return { ...hb, plugin, host, errors }
}

describe('flush with a deadline over a backend that stops answering', () => {
  test('flush(id, { timeoutMs }) rejects E_TIMEOUT in about the deadline; once the backend answers every event is stored once, in order', async () => {
    const { plugin, host, hang, stored, appends } = await setup()
    const s = host.startSession({ id: 'hung' })
    s.runTurn(oneTurn(1))
    await plugin.flush('hung')
    const h = hang('append', 'hung')
    s.runTurn(oneTurn(2)) // turn/end drains at once: this append hangs
    await h.started
    const { ms, error } = await timed(plugin.flush('hung', { timeoutMs: DEADLINE }))
    expect(isSessionPersistenceError(error, 'E_TIMEOUT')).toBe(true)
    expect((error as SessionPersistenceError).sessionId).toBe('hung')
    expect((error as { timeoutMs?: number }).timeoutMs).toBe(DEADLINE)
    expect(ms).toBeGreaterThanOrEqual(DEADLINE - 20)
    expect(ms).toBeLessThan(LATE)
    s.runTurn(oneTurn(3)) // arrives while the backend hangs: buffered behind the write in flight
    // Still hung: a second flush with a deadline times out too, and nothing is lost meanwhile.
    expect(isSessionPersistenceError((await timed(plugin.flush('hung', { timeoutMs: 50 }))).error, 'E_TIMEOUT')).toBe(true)
    h.release()
    await plugin.flush('hung') // no deadline: waits for the backend, as before
    expect(await stored('hung')).toEqual(s.events)
    // Each seq was appended exactly once: the batch in flight was neither lost nor repeated.
    const seqs = appends.filter((a) => a.id === 'hung').flatMap((a) => a.seqs)
    expect(seqs).toEqual(s.events.map((e) => e.seq))
    await plugin.dispose()
  })

  test('flush() of all sessions names each session that timed out, and only those; the others are durable', async () => {
    const { plugin, host, hang, stored } = await setup()
    const a = host.startSession({ id: 'a-hung' })
    const b = host.startSession({ id: 'b-fine' })
    const h = hang('create', 'a-hung') // its first drain never gets its session created
    a.runTurn(oneTurn(1))
    b.runTurn(oneTurn(1))
    await h.started
    const { ms, error } = await timed(plugin.flush(undefined, { timeoutMs: DEADLINE }))
    expect(codesOf(error)).toEqual(['a-hung:E_TIMEOUT'])
    expect(ms).toBeLessThan(LATE)
    expect(await stored('b-fine')).toEqual(b.events)
    h.release()
    await plugin.flush()
    expect(await stored('a-hung')).toEqual(a.events)
    await plugin.dispose()
  })

  test('without timeoutMs flush waits as long as the backend takes', async () => {
    const { plugin, host, hang, stored } = await setup()
    const s = host.startSession({ id: 'patient' })
    const h = hang('append', 'patient')
    s.runTurn(oneTurn(1))
    await h.started
    let settled = false
    const flushing = plugin.flush('patient').then(() => (settled = true))
    await new Promise((r) => setTimeout(r, DEADLINE * 2))
    expect(settled).toBe(false)
    h.release()
    await flushing
    expect(await stored('patient')).toEqual(s.events)
    await plugin.dispose()
  })

  test('a deadline that is met resolves like a flush without one', async () => {
    const { plugin, host, stored } = await setup()
    const s = host.startSession({ id: 'quick' })
    s.runTurn(oneTurn(1))
    await plugin.flush('quick', { timeoutMs: LATE })
    expect(await stored('quick')).toEqual(s.events)
    await plugin.flush(undefined, { timeoutMs: Number.POSITIVE_INFINITY })
    await plugin.dispose({ timeoutMs: LATE })
  })
})

describe('dispose with a deadline', () => {
  test('reports the hung session with E_TIMEOUT, releases every other session, settles in about the deadline; the hung write lands once when the backend answers', async () => {
    const { plugin, host, hang, stored, store, appends } = await setup()
    const hung = host.startSession({ id: 'hung' })
    const fine = host.startSession({ id: 'fine' })
    hung.runTurn(oneTurn(1))
    fine.runTurn(oneTurn(1))
    await plugin.flush()
    const h = hang('append', 'hung')
    hung.runTurn(oneTurn(2))
    fine.runTurn(oneTurn(2))
    await h.started
    const { ms, error } = await timed(plugin.dispose({ timeoutMs: DEADLINE }))
    expect(codesOf(error)).toEqual(['hung:E_TIMEOUT'])
    expect(ms).toBeGreaterThanOrEqual(DEADLINE - 20)
    expect(ms).toBeLessThan(LATE)
    // Everything else was made durable and released: another instance loads it at once.
    const other = createMemoryPersistence({ store })
    expect((await other.load('fine')).events).toEqual(fine.events)
    await other.close('fine')
    // The hung session keeps its lock while its write is in flight…
    expect((await timed(other.load('hung'))).error).toMatchObject({ code: 'E_LOCKED' })
    // …and when the backend answers, that write lands (once) and the lock is released.
    h.release()
    await expect.poll(async () => (await timed(other.load('hung'))).error, { timeout: LATE }).toBeUndefined()
    expect(await stored('hung')).toEqual(hung.events)
    const seqs = appends.filter((a) => a.id === 'hung').flatMap((a) => a.seqs)
    expect(seqs).toEqual(hung.events.map((e) => e.seq))
    // Disposed: nothing more is accepted.
    hung.emit('user/message', { content: 'late' })
    expect(await stored('hung')).toHaveLength(hung.events.length - 1)
    await other.closeAll()
  })

  test('a second dispose with a deadline settles by its own deadline while the first waits', async () => {
    const { plugin, host, hang, stored } = await setup()
    const s = host.startSession({ id: 'slow' })
    const h = hang('append', 'slow')
    s.runTurn(oneTurn(1))
    await h.started
    let firstSettled = false
    const first = plugin.dispose().then(
      () => (firstSettled = true),
      () => (firstSettled = true),
    )
    const { error } = await timed(plugin.dispose({ timeoutMs: DEADLINE }))
    expect(codesOf(error)).toEqual(['slow:E_TIMEOUT'])
    expect(firstSettled).toBe(false)
    h.release()
    await first
    expect(await stored('slow')).toEqual(s.events)
  })

  test('over the JSONL backend, a datasync that never returns: dispose settles by its deadline, and the events are on disk once it returns', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const persistence = createJsonlPersistence({ root, fs, staleLockMs: 1000 })
    const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: 10_000 })
    plugin.on('error', () => {})
    const host = createReferenceHost({ cwd: '/project' })
    await plugin.apply(host)
    const s = host.startSession({ id: 'disk' })
    s.runTurn(oneTurn(1))
    await plugin.flush('disk')
    let release = () => {}
    const gate = new Promise<void>((r) => (release = r))
    let started = () => {}
    const inFlight = new Promise<void>((r) => (started = r))
    fs.inject({
      op: 'datasync',
      times: 1,
      before: () => {
        started()
        return gate
      },
    })
    s.runTurn(oneTurn(2))
    await inFlight
    const f = await timed(plugin.flush('disk', { timeoutMs: DEADLINE }))
    expect(isSessionPersistenceError(f.error, 'E_TIMEOUT')).toBe(true)
    const d = await timed(plugin.dispose({ timeoutMs: DEADLINE }))
    expect(codesOf(d.error)).toEqual(['disk:E_TIMEOUT'])
    expect(d.ms).toBeLessThan(LATE)
    release()
    const fresh = createJsonlPersistence({ root })
    await expect.poll(async () => (await timed(fresh.load('disk'))).error, { timeout: LATE }).toBeUndefined()
    expect((await fresh.inspect('disk')).events).toEqual(s.events)
    await fresh.closeAll()
    await persistence.closeAll()
  })
})

describe('bad deadlines are E_CONFIG', () => {
  test.each([
    ['negative', { timeoutMs: -1 }],
    ['NaN', { timeoutMs: Number.NaN }],
    ['a string', { timeoutMs: '100' }],
    ['null', { timeoutMs: null }],
    ['options not an object', 100],
    ['options null', null],
  ])('%s', async (_name, options) => {
    const { plugin, host, stored } = await setup()
    const s = host.startSession({ id: 'cfg' })
    s.runTurn(oneTurn(1))
    const bad = options as unknown as { timeoutMs?: number }
    expect((await timed(plugin.flush('cfg', bad))).error).toMatchObject({ code: 'E_CONFIG' })
    expect((await timed(plugin.flush(undefined, bad))).error).toMatchObject({ code: 'E_CONFIG' })
    expect((await timed(plugin.dispose(bad))).error).toMatchObject({ code: 'E_CONFIG' })
    // A refused dispose did not start disposing: the plugin still writes.
    s.runTurn(oneTurn(2))
    await plugin.flush('cfg')
    expect(await stored('cfg')).toEqual(s.events)
    await plugin.dispose()
  })
})
