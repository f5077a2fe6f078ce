import { link, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { fileSink, refuseStoreTarget } from '../src/cli/sink.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// docs/cli.md (export): an existing --out FILE is overwritten, except what the store keeps. A
// hard link outside the root to ANOTHER session's log (or to a lock record, or any file in a
// bucket) is the store's file under another name: writing it would destroy that file (a hunt's
// find: `verify` then called the other session corrupt, "the header is not JSON: Unexpected
// token '#'"). The guard used to compare the inode with the exported session's own log only.

async function twoSessions(): Promise<{ root: string; other: string; otherBytes: Buffer }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('a', { cwd: '/home/ana/proj' }))
  await p.append('a', turn(0, 1))
  await p.create(meta('b', { cwd: '/elsewhere' }))
  await p.append('b', [...turn(0, 1), ...turn(4, 2)])
  await p.closeAll()
  const other = p.locate(meta('b', { cwd: '/elsewhere' })).path
  return { root, other, otherBytes: await readFile(other) }
}

describe('export --out: a hard link to a file the store keeps is refused', () => {
  test("a hard link to another session's log: E_CONFIG naming that log, exit 1, its bytes unchanged", async () => {
    const { root, other, otherBytes } = await twoSessions()
    const outside = await tmpRoot()
    const hard = join(outside, 'hard.md')
    await link(other, hard)
    for (const format of ['md', 'json']) {
      const r = await runCli(['--root', root, 'export', 'a', '--format', format, '--out', hard])
      expect(r).toEqual({
        code: 1,
        stdout: '',
        stderr: `session-jsonl: E_CONFIG: refusing to write ${hard}: it is a hard link to ${other}, a file the session root keeps; write the export outside the session root\n`,
      })
      expect(await readFile(other)).toEqual(otherBytes)
    }
    const verify = await runCli(['--root', root, 'verify'])
    expect(verify.code).toBe(0)
    expect(verify.stdout).toMatch(/^ok +b \(8 events\)$/m)
  }, 60_000)

  test('a hard link to a lock record under .locks, or to any other file in a bucket: refused, the file unchanged', async () => {
    const { root, other } = await twoSessions()
    const writer = createJsonlPersistence({ root })
    await writer.create(meta('held'))
    await writer.append('held', turn(0, 1))
    try {
      const [lockName] = (await readdir(join(root, '.locks'))).filter((n) => n.endsWith('.lock'))
      const lock = join(root, '.locks', lockName!)
      const lockBytes = await readFile(lock)
      const note = join(other, '..', 'notes.txt')
      await writeFile(note, 'kept by hand in a bucket')
      const outside = await tmpRoot()
      for (const [kept, bytes] of [
        [lock, lockBytes],
        [note, Buffer.from('kept by hand in a bucket')],
      ] as const) {
        const hard = join(outside, `to-${kept.split('/').pop()}.md`)
        await link(kept, hard)
        const r = await runCli(['--root', root, 'export', 'a', '--format', 'md', '--out', hard])
        expect(r.code).toBe(1)
        expect(r.stderr).toBe(`session-jsonl: E_CONFIG: refusing to write ${hard}: it is a hard link to ${kept}, a file the session root keeps; write the export outside the session root\n`)
        expect(await readFile(kept)).toEqual(bytes)
      }
    } finally {
      await writer.closeAll()
    }
  }, 60_000)

  test('a file with several names, none of them in the root, is overwritten as before (every name shows the export)', async () => {
    const { root } = await twoSessions()
    const outside = await tmpRoot()
    const first = join(outside, 'first.md')
    await writeFile(first, 'old content, longer than nothing at all, to be truncated away')
    await link(first, join(outside, 'second.md'))
    const r = await runCli(['--root', root, 'export', 'a', '--format', 'md', '--out', first])
    expect(r).toEqual({ code: 0, stdout: '', stderr: `wrote ${first}\n` })
    expect(await readFile(first, 'utf8')).toMatch(/^# Session a\n[\s\S]*\*Turn ended: completed\*\n$/)
    expect(await readFile(join(outside, 'second.md'), 'utf8')).toBe(await readFile(first, 'utf8'))
    expect((await stat(first)).mode & 0o777).toBe(0o600)
  }, 60_000)

  test('the check is of the file opened, not of the name: a target swapped after the check is refused unwritten', async () => {
    const { root, other, otherBytes } = await twoSessions()
    const outside = await tmpRoot()
    const out = join(outside, 'out.md')
    const swaps: [string, () => Promise<void>, string][] = [
      ['a hard link to another log', () => link(other, out), 'E_CONFIG'],
      ['a symbolic link to another log', () => symlink(other, out), 'E_IO'],
    ]
    for (const [what, swap, code] of swaps) {
      for (const before of ['an innocent file', 'nothing']) {
        await rm(out, { force: true })
        if (before === 'an innocent file') await writeFile(out, 'innocent')
        const judged = await refuseStoreTarget(out, root, undefined) // passes: not the store's
        await rm(out, { force: true })
        await swap()
        const opened = fileSink(out, judged)
        await expect(opened, `${what} after ${before}`).rejects.toMatchObject({ code })
        expect(await readFile(other), `${what} after ${before}`).toEqual(otherBytes)
      }
    }
  }, 60_000)
})
