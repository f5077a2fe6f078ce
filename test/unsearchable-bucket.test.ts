import { chmod, chown, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { bucketName, createJsonlPersistence, isSessionPersistenceError } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A root that is a mount point holds lost+found (root's, 0700). For any other user a look-up by
// id stat'ed <root>/lost+found/<id>.jsonl, got EACCES and failed: every load, create and delete
// failed with E_IO while list() skipped that directory with a warning (docs/decisions.md).
// Permissions mean nothing to root, so as root the test runs its checks with the effective user
// and group of nobody (65534, in this process: the thread pool's calls run as nobody too); as any
// other user it takes the search permission off a directory of its own.
const NOBODY = 65534
const asRoot = process.getuid?.() === 0

async function asOtherUser<T>(work: () => Promise<T>): Promise<T> {
  if (!asRoot) return work()
  process.setegid!(NOBODY)
  process.seteuid!(NOBODY)
  try {
    return await work()
  } finally {
    process.seteuid!(0)
    process.setegid!(0)
  }
}

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work
    return 'resolved'
  } catch (err) {
    if (isSessionPersistenceError(err)) return `${err.code} ${err.message}`
    throw err
  }
}

/** A root with sessions `good` (no cwd) and `proj` (cwd /proj), and a directory the user may not search, as root's lost+found. */
async function fixture(): Promise<{ root: string; lostFound: string }> {
  const base = await tmpRoot()
  if (asRoot) await chown(base, NOBODY, NOBODY)
  const root = join(base, 'r')
  await asOtherUser(async () => {
    const p = createJsonlPersistence({ root })
    for (const m of [meta('good'), meta('proj', { cwd: '/proj' })]) {
      await p.create(m)
      await p.append(m.id, turn(0, 1))
    }
    await p.closeAll()
  })
  const lostFound = join(root, 'lost+found')
  await mkdir(lostFound, { mode: 0o700 }) // root's as root; else the user's own, made unsearchable:
  if (!asRoot) await chmod(lostFound, 0o000)
  return { root, lostFound }
}

test.skipIf(process.platform === 'win32')('a directory the user may not search under the root does not make sessions unloadable, nor new ones uncreatable', async () => {
  const { root, lostFound } = await fixture()
  const warnings: string[] = []
  await asOtherUser(async () => {
    expect(process.geteuid?.()).not.toBe(0) // the checks below run as a user permissions apply to
    const p = createJsonlPersistence({ root, logger: { warn: (m) => warnings.push(m) } })
    expect((await p.load('good')).events).toHaveLength(4)
    expect((await p.load('proj')).events).toHaveLength(4)
    expect((await p.inspect('good')).events).toHaveLength(4)
    expect((await p.read('proj')).events).toHaveLength(4)
    await p.create(meta('new'))
    await p.append('new', turn(0, 1))
    await p.closeAll()
    await p.delete('good')
    expect(await codeOf(p.load('good'))).toMatch(/^E_NOT_FOUND /)
    const problems: string[] = []
    expect((await p.list({ onProblem: (x) => problems.push(`${x.code} ${x.path}`) })).map((l) => l.meta.id).sort()).toEqual(['new', 'proj'])
    expect(problems).toEqual([`E_IO ${lostFound}`])
  })
  // One warning for that directory, not one per look-up (there were seven).
  expect(warnings).toHaveLength(1)
  expect(warnings[0]).toContain(`skipped ${lostFound} when looking up sessions: EACCES`)
})

test.skipIf(process.platform === 'win32')("the bucket a session is to be written in still fails when the user may not search it (E_IO)", async () => {
  const { root } = await fixture()
  const bucket = join(root, bucketName('/locked'))
  await mkdir(bucket, { mode: 0o700 })
  if (!asRoot) await chmod(bucket, 0o000)
  await asOtherUser(async () => {
    const p = createJsonlPersistence({ root, logger: { warn: () => {} } })
    expect(await codeOf(p.create(meta('there', { cwd: '/locked' })))).toMatch(new RegExp(`^E_IO .*EACCES.*${bucket.replace(/[+.]/g, '\\$&')}`))
    await p.closeAll()
  })
})
