import { execFile } from 'node:child_process'
import { readdir, readFile, rename, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createFaultInjectingFileSystem } from '../src/testing/fault-injection.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A release of the writer lock that failed once (EMFILE on the read-back of the lock, a passing
// error) left the lock held for the life of the process: the lease counted itself released
// before it had removed anything, close dropped the session, and the record names a live
// process of this host, which is never taken over. Every instance, this one's included, got
// E_LOCKED naming its own process, for ever. Now a failed release stays owed: it is retried by
// the next acquire of that lock in this process, and by a timer of its own.

const WORKER = fileURLToPath(new URL('./fixtures/lock-worker.mjs', import.meta.url))
const STALE = 1000

async function heldSession(id = 's', staleLockMs = STALE) {
  const root = await tmpRoot()
  const fs = createFaultInjectingFileSystem()
  const p = createJsonlPersistence({ root, fs, staleLockMs })
  await p.create(meta(id))
  await p.append(id, turn(0, 1)) // takes the lock
  const lock = join(root, '.locks', `${id}.lock`)
  return { root, fs, p, lock }
}

const lockNames = async (root: string) => (await readdir(join(root, '.locks'))).filter((n) => n.endsWith('.lock'))

/** Waits until `cond` holds; a guard against hanging (20 s), not a measurement. */
async function until(cond: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

test('a close whose release failed once: the same instance loads the session again', async () => {
  const { root, fs, p, lock } = await heldSession()
  fs.inject({ op: 'open', path: lock, code: 'EMFILE', times: 1 })
  const err = await rejection(p.close('s'))
  expect(err.code).toBe('E_IO')
  expect(err.message).toContain('EMFILE')
  const { events } = await p.load('s')
  expect(events).toHaveLength(4)
  await p.append('s', turn(4, 2))
  await p.closeAll()
  expect(await lockNames(root)).toEqual([])
})

test('a close whose release failed once: another instance of the same process loads it', async () => {
  const { root, fs, p, lock } = await heldSession()
  fs.inject({ op: 'open', path: lock, code: 'EMFILE', times: 1 })
  expect((await rejection(p.close('s'))).code).toBe('E_IO')
  const q = createJsonlPersistence({ root, staleLockMs: STALE })
  expect((await q.load('s')).events).toHaveLength(4)
  // and the two still exclude each other: q's lock is live, p is refused, naming this process
  const refused = await rejection(p.load('s'))
  expect(refused.code).toBe('E_LOCKED')
  expect(refused.message).toContain(`pid ${process.pid}`)
  await p.closeAll()
  expect(await lockNames(root)).toEqual(['s.lock']) // p's late retry did not remove q's lock
  await q.closeAll()
  expect(await lockNames(root)).toEqual([])
})

test('a release that keeps failing: the next load is refused with the failure (E_IO), not E_LOCKED naming this process; once it passes, the load succeeds', async () => {
  const { root, fs, p, lock } = await heldSession()
  const clear = fs.inject({ op: 'open', path: lock, code: 'EMFILE' })
  expect((await rejection(p.close('s'))).code).toBe('E_IO')
  const q = createJsonlPersistence({ root, staleLockMs: STALE })
  const refused = await rejection(q.load('s'))
  expect(refused.code).toBe('E_IO')
  expect(refused.message).toContain('EMFILE')
  clear()
  expect((await q.load('s')).events).toHaveLength(4)
  await q.closeAll()
  expect(await lockNames(root)).toEqual([])
})

test('a failed load whose release failed once leaves the session unlocked: the next load gets the load error again, not E_LOCKED', async () => {
  const { root, fs, p, lock } = await heldSession()
  await p.closeAll()
  const log = p.locate(meta('s')).path
  const bytes = await readFile(log, 'utf8')
  // committed history damaged (the first event line is no JSON): E_CORRUPT, the log untouched
  const lines = bytes.split('\n')
  lines[1] = `{${lines[1]!.slice(2)}`
  await writeFile(log, lines.join('\n'))
  fs.inject({ op: 'open', path: lock, code: 'EMFILE', times: 1 }) // the release's read-back of the lock
  expect((await rejection(p.load('s'))).code).toBe('E_CORRUPT')
  expect((await rejection(p.load('s'))).code).toBe('E_CORRUPT')
  expect(await lockNames(root)).toEqual([])
})

test('a close whose release failed once: another process is not locked out for good (the release is retried by itself)', async () => {
  const { root, fs, p, lock } = await heldSession()
  fs.inject({ op: 'open', path: lock, code: 'EMFILE', times: 1 })
  expect((await rejection(p.close('s'))).code).toBe('E_IO')
  // nothing more is asked of this process: the owed release is retried every staleLockMs / 3
  await until(async () => (await lockNames(root)).length === 0, 'the owed release was retried')
  const { stdout } = await promisify(execFile)(process.execPath, [WORKER, root, 's', 'resume', '0', String(STALE)])
  expect(JSON.parse(stdout)).toMatchObject({ ok: true, before: 4 })
})

test('regression: a retried release confirms the lock first: it never unlinks a lock another host took over from its stale heartbeat', async () => {
  // After a release failed, the lease stops refreshing; once the lock has gone unrefreshed for
  // staleLockMs, a host that judges it by its mtime alone may take it over (its pid means nothing
  // there). Such a taker renames its own record over the lock only if the mtime is still the one
  // it judged stale (docs/locking.md, Taking over). Here one does so just before a retry's unlink:
  // a retry that read the lock as ours without refreshing it removed the new holder's lock.
  // A staleLockMs of 4 s: the retries (every 1.3 s) have two seconds of slack on a busy machine.
  const staleLockMs = 4000
  const { root, fs, p, lock } = await heldSession('s', staleLockMs)
  const failing = fs.inject({ op: 'unlink', path: lock, code: 'EACCES' }) // the timer's retries fail too
  expect((await rejection(p.close('s'))).code).toBe('E_IO')
  await new Promise((r) => setTimeout(r, staleLockMs + 300))
  failing()
  const judged = (await stat(lock)).mtimeMs
  const stale = Date.now() - judged >= staleLockMs
  const foreign = join(root, '.locks', '.tmp-foreign-taker')
  let tookOver = false
  fs.inject({
    op: 'unlink',
    path: lock,
    times: 1,
    before: async () => {
      // The other host's takeover, checked as it checks: stale, and its mtime unchanged since.
      if (!stale || (await stat(lock)).mtimeMs !== judged) return
      await writeFile(foreign, JSON.stringify({ pid: 1, host: 'another-host', token: 'foreign', since: Date.now() }))
      await rename(foreign, lock)
      tookOver = true
    },
  })
  await p.closeAll() // retries the owed release now
  // The retries kept the heartbeat fresh, so no taker could judge the lock stale, and the last one
  // removed our own lock (a taker that had won would have kept its lock: it is never unlinked).
  expect({ stale, tookOver }).toEqual({ stale: false, tookOver: false })
  expect(await lockNames(root)).toEqual([])
})
