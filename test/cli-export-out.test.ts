import { existsSync } from 'node:fs'
import { link, mkdir, readFile, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

async function rootWithLog(): Promise<{ root: string; log: string; bytes: Buffer }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  const m = meta('s')
  await p.create(m)
  await p.append('s', [...turn(0, 1), ...turn(4, 2)])
  await p.closeAll()
  const log = p.locate(m).path
  return { root, log, bytes: await readFile(log) }
}

describe('export --out never overwrites what the store keeps', () => {
  test("the session's own log, by its path, through a symlinked directory, a symlink or a hard link: refused (E_CONFIG, exit 1), the log intact", async () => {
    const { root, log, bytes } = await rootWithLog()
    const elsewhere = await tmpRoot()
    await symlink(join(log, '..'), join(elsewhere, 'bucket'))
    await symlink(log, join(elsewhere, 'alias.md'))
    await link(log, join(elsewhere, 'hard.md'))
    for (const out of [log, join(elsewhere, 'bucket', 's.jsonl'), join(elsewhere, 'alias.md'), join(elsewhere, 'hard.md')]) {
      for (const format of ['md', 'json']) {
        const r = await runCli(['--root', root, 'export', 's', '--format', format, '--out', out])
        expect({ out, ...r }).toEqual({
          out,
          code: 1,
          stdout: '',
          stderr: expect.stringMatching(new RegExp(`^session-jsonl: E_CONFIG: refusing to write ${out.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: it is the session's own log.*; write the export outside the session root\\n$`)),
        })
        expect(await readFile(log)).toEqual(bytes)
      }
    }
    expect((await runCli(['--root', root, 'show', 's'])).code).toBe(0)
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close

  test('a new or existing file in a bucket or in .locks is refused and not created; files elsewhere, even existing ones, are written', async () => {
    const { root, log, bytes } = await rootWithLog()
    await mkdir(join(root, '.locks'), { recursive: true })
    await writeFile(join(root, '.locks', 'x'), 'keep')
    for (const out of [join(log, '..', 'new.md'), join(log, '..', 'other.jsonl'), join(root, '.locks', 'x'), join(root, '.locks', 'y.md')]) {
      const r = await runCli(['--root', root, 'export', 's', '--format', 'md', '--out', out])
      expect(r.code).toBe(1)
      expect(r.stderr).toMatch(/^session-jsonl: E_CONFIG: refusing to write .*: it is inside .*, a directory of the session root .*; write the export outside the session root\n$/)
    }
    // A symbolic link outside the root whose target does not exist yet but lies in a bucket (two
    // hops, the second relative): opening it would create the file there (a hunt's find).
    const links = await tmpRoot()
    await symlink(join(log, '..', 'zz-export.jsonl'), join(links, 'hop'))
    await symlink('hop', join(links, 'dangling.md'))
    const through = await runCli(['--root', root, 'export', 's', '--format', 'md', '--out', join(links, 'dangling.md')])
    expect(through.code).toBe(1)
    expect(through.stderr).toMatch(/^session-jsonl: E_CONFIG: refusing to write .*dangling\.md: it is inside .*, a directory of the session root /)
    expect(existsSync(join(log, '..', 'zz-export.jsonl'))).toBe(false)
    expect(existsSync(join(log, '..', 'new.md'))).toBe(false)
    expect(existsSync(join(root, '.locks', 'y.md'))).toBe(false)
    expect(await readFile(join(root, '.locks', 'x'), 'utf8')).toBe('keep')
    expect(await readFile(log)).toEqual(bytes)
    const outside = join(await tmpRoot(), 'existing.md')
    await writeFile(outside, 'old content that is longer than nothing at all')
    const r = await runCli(['--root', root, 'export', 's', '--format', 'md', '--out', outside])
    expect(r).toEqual({ code: 0, stdout: '', stderr: `wrote ${outside}\n` })
    expect(await readFile(outside, 'utf8')).toMatch(/^# Session s\n[\s\S]*\*Turn ended: completed\*\n$/)
    const beside = join(root, 'export.md') // the root itself holds no logs
    expect((await runCli(['--root', root, 'export', 's', '--format', 'md', '--out', beside])).code).toBe(0)
    expect(await readFile(beside, 'utf8')).toMatch(/^# Session s\n/)
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close
})
