import { utimes } from 'node:fs/promises'
import { hostname } from 'node:os'
import { describe, expect, test } from 'vitest'
import { cliInProcess } from './helpers/cli-in-process.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { lockHolder as holder } from './helpers/lock-holder.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// SPEC §11: prune never deletes a locked session, and `--dry-run` only lists: what it lists is
// what the real run would do, so a session a live writer holds is reported as skipped (E_LOCKED),
// not as one it would remove.

const DAY = 86_400_000

/** The CLI from the sources, in this process: its exit code and output. */
const cli = async (args: string[]) => {
  const { result, out, err } = await cliInProcess(args)
  return { code: result, out, err }
}


describe('prune --dry-run and locks', () => {
  test.skipIf(process.platform === 'win32')('a session another process holds is reported as the real run skips it (E_LOCKED), not as one it would remove', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    const paths: Record<string, string> = {}
    for (const id of ['old', 'oldlocked', 'fresh']) {
      await p.create(meta(id))
      await p.append(id, turn(0, 1))
      paths[id] = p.locate(meta(id)).path
    }
    await p.closeAll()
    const child = await holder(root, 'oldlocked')
    try {
      const now = Date.now()
      // Aged after the holder's append: both old logs were last written 40 days ago.
      for (const id of ['old', 'oldlocked']) await utimes(paths[id]!, new Date(now - 40 * DAY), new Date(now - 40 * DAY))
      const before = await rootFiles(root)

      const dry = await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run'])
      expect(dry.code).toBe(0)
      const said = `session 'oldlocked' is being written by pid ${child.pid} on host ${hostname()} since `
      expect(dry.err).toMatch(new RegExp(`^skipped oldlocked: E_LOCKED: ${said.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\S+\\n$`))
      const lines = dry.out.trim().split('\n')
      expect(lines.map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual(['would remove old', 'would remove 1'])
      expect(lines[1]).toMatch(/^would remove 1 session\(s\), .*; 1 skipped$/)
      const dryJson = JSON.parse((await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run', '--json'])).out)
      expect(dryJson.wouldRemove.map((s: { id: string }) => s.id)).toEqual(['old'])
      expect(dryJson.skipped).toEqual([{ id: 'oldlocked', code: 'E_LOCKED', message: expect.stringContaining(said) }])
      expect(await rootFiles(root)).toEqual(before)

      // The real run does what the dry run said, in the same words.
      const real = await cli(['--root', root, 'prune', '--older-than', '30d', '--json'])
      const realJson = JSON.parse(real.out)
      expect(realJson.removed.map((s: { id: string }) => s.id)).toEqual(dryJson.wouldRemove.map((s: { id: string }) => s.id))
      expect(realJson.skipped).toEqual(dryJson.skipped)
      expect([...(await rootFiles(root)).keys()].sort()).toEqual([...before.keys()].filter((k) => !k.endsWith('/old.jsonl')).sort())
    } finally {
      child.kill('SIGKILL')
    }
  })

  test('a lock its holder left behind (a dead process) does not keep a session from the dry run: the real run takes it over and removes it', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('orphan'))
    await p.append('orphan', turn(0, 1))
    const path = p.locate(meta('orphan')).path
    await p.closeAll()
    const child = await holder(root, 'orphan')
    child.kill('SIGKILL')
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)))
    const old = new Date(Date.now() - 40 * DAY)
    await utimes(path, old, old)
    const dry = JSON.parse((await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run', '--json'])).out)
    expect([dry.wouldRemove.map((s: { id: string }) => s.id), dry.skipped]).toEqual([['orphan'], []])
    const real = JSON.parse((await cli(['--root', root, 'prune', '--older-than', '30d', '--json'])).out)
    expect([real.removed.map((s: { id: string }) => s.id), real.skipped]).toEqual([['orphan'], []])
  })
})
