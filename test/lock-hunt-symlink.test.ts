import { mkdir, readdir, readFile, readlink, symlink, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { parseStartTime } from '../src/jsonl/lock/process-identity.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A symbolic link where a session's lock (or a takeover marker) goes is no lock the package made
// (it only ever link()s and rename()s regular files there): like a FIFO or a directory it is no
// lock and never stale, E_IO at once (contract §5.3). A dangling one read as "released" (the
// open said ENOENT) while link() said EEXIST, round and round: a false E_LOCKED ('an unknown
// holder (the lock kept changing hands)') after eight tries.

const STALE = 1000

async function seeded(id: string) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, turn(0, 1))
  await p.closeAll()
  await mkdir(join(root, '.locks'), { recursive: true })
  return { root, dir: join(root, '.locks'), lock: join(root, '.locks', `${id}.lock`) }
}

/** A record of this host's process 1 (alive), or of a process of this host that no longer exists. */
async function record(token: string, alive: boolean): Promise<string> {
  const startOf = async (pid: number) => parseStartTime(await readFile(`/proc/${pid}/stat`, 'utf8'))!
  const who = alive ? { pid: 1, startTime: await startOf(1) } : { pid: process.pid, startTime: String(Number(await startOf(process.pid)) + 1) }
  return JSON.stringify({
    ...who,
    host: hostname(),
    bootId: (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(),
    pidNs: await readlink('/proc/self/ns/pid'),
    since: Date.now(),
    staleLockMs: STALE,
    token,
  })
}

describe.skipIf(process.platform !== 'linux')('a symbolic link at a lock name is no lock: E_IO at once', () => {
  for (const op of ['load', 'delete'] as const) {
    test(`${op} with a dangling symbolic link in the place of the lock`, async () => {
      const { root, dir, lock } = await seeded('d')
      await symlink(join(root, 'nowhere', 'zz'), lock)
      const p = createJsonlPersistence({ root, staleLockMs: STALE })
      const err = await rejection(op === 'delete' ? p.delete('d') : p.load('d'))
      await p.closeAll().catch(() => {})
      expect(err.code).toBe('E_IO')
      expect(err.message).toContain(`${lock} is not a regular file (a symbolic link)`)
      expect((await readdir(dir)).sort()).toEqual(['d.lock']) // the link left as it was, nothing else
      expect(await readlink(lock)).toBe(join(root, 'nowhere', 'zz'))
    })
  }

  test('create + first append with a dangling symbolic link where the new session\'s lock goes', async () => {
    const { root, dir } = await seeded('d')
    const lock = join(dir, 'n.lock')
    await symlink(join(root, 'nowhere'), lock)
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    await p.create(meta('n'))
    const err = await rejection(p.append('n', turn(0, 1)))
    await p.closeAll().catch(() => {})
    expect(err.code).toBe('E_IO')
    expect(err.message).toContain(`${lock} is not a regular file (a symbolic link)`)
  })

  test('a symbolic link to a regular file holding a live-looking record is no lock either (E_IO, not E_LOCKED)', async () => {
    const { root, dir, lock } = await seeded('d')
    const elsewhere = join(root, 'x.lock')
    await writeFile(elsewhere, await record('livetoken', true))
    await symlink(elsewhere, lock)
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    const err = await rejection(p.load('d'))
    expect(err.code).toBe('E_IO')
    expect(err.message).toContain(`${lock} is not a regular file (a symbolic link)`)
    expect((await readdir(dir)).sort()).toEqual(['d.lock'])
  })

  test('a dangling symbolic link where the takeover marker of a stale lock goes', async () => {
    const { root, dir, lock } = await seeded('d')
    await writeFile(lock, await record('deadlock', false))
    const marker = join(dir, '.takeover-deadlock')
    await symlink(join(root, 'nowhere'), marker)
    const p = createJsonlPersistence({ root, staleLockMs: STALE })
    const err = await rejection(p.load('d'))
    expect(err.code).toBe('E_IO')
    expect(err.message).toContain(`${marker} is not a regular file (a symbolic link)`)
    expect(JSON.parse(await readFile(lock, 'utf8')).token).toBe('deadlock') // not taken over
  })
})
