import { utimes } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli as run } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `ls --limit n` is a session picker's query (§15.4): the n sessions written last, newest
// first, whatever order they were created in.

/** Five sessions created a, b, c, d, e (oldest first) but last written in the order given. */
async function root(writtenOldestFirst: string[], cwdOf: (id: string) => string): Promise<string> {
  const dir = await tmpRoot()
  const p = createJsonlPersistence({ root: dir })
  const ids = ['a', 'b', 'c', 'd', 'e']
  for (const [i, id] of ids.entries()) {
    await p.create(meta(id, { createdAt: 1_000 * (i + 1), cwd: cwdOf(id) }))
    await p.append(id, turn(0, 1))
  }
  await p.closeAll()
  for (const [i, id] of writtenOldestFirst.entries()) {
    const at = new Date(Date.UTC(2026, 0, 1, 0, i))
    await utimes(p.locate(meta(id, { cwd: cwdOf(id) })).path, at, at)
  }
  return dir
}

const ids = (stdout: string) => stdout.trim().split('\n').slice(1).map((l) => l.split(/\s+/)[0])

describe('session-jsonl ls --limit', () => {
  test('the n sessions written last, most recent first, with their last write; --json the same', async () => {
    const dir = await root(['e', 'a', 'd', 'b', 'c'], () => '/proj')
    const r = await run(['--root', dir, 'ls', '--limit', '3'])
    expect(r.code).toBe(0)
    expect(ids(r.stdout)).toEqual(['c', 'b', 'd'])
    expect(r.stdout.split('\n')[0]).toMatch(/^ID +LAST WRITE \(UTC\) +CREATED \(UTC\) +CWD +SIZE/)
    expect(r.stdout).toContain('2026-01-01 00:04:00') // c's last write
    const json = JSON.parse((await run(['--root', dir, 'ls', '--limit', '2', '--json'])).stdout)
    expect(json.sessions.map((s: { meta: { id: string } }) => s.meta.id)).toEqual(['c', 'b'])
    expect(ids((await run(['--root', dir, 'ls', '--limit', '50'])).stdout)).toEqual(['c', 'b', 'd', 'a', 'e'])
    expect(ids((await run(['--root', dir, 'ls'])).stdout)).toEqual(['e', 'd', 'c', 'b', 'a']) // without --limit: by creation
  })

  test('with --cwd: the n of that project written last, even when other projects were written since', async () => {
    const dir = await root(['a', 'c', 'b', 'd', 'e'], (id) => (id === 'a' || id === 'c' ? '/proj/one' : '/proj/two'))
    const r = await run(['--root', dir, 'ls', '--limit', '2', '--cwd', '/proj/one'])
    expect(r.code).toBe(0)
    expect(ids(r.stdout)).toEqual(['c', 'a'])
    expect(ids((await run(['--root', dir, 'ls', '--limit', '1', '--cwd', '/proj/one'])).stdout)).toEqual(['c'])
  })

  test('a limit that is not a positive integer is a usage error: one line, exit 2', async () => {
    const dir = await tmpRoot()
    for (const bad of ['0', '-1', 'x', '1.5', '1e3', '']) {
      const r = await run(['--root', dir, 'ls', `--limit=${bad}`])
      expect(r.code, bad).toBe(2)
      expect(r.stderr.trim().split('\n'), bad).toHaveLength(1)
      expect(r.stderr, bad).toContain('--limit')
    }
    const split = await run(['--root', dir, 'ls', '--limit', '-1'])
    expect(split.code).toBe(2)
    expect(split.stderr.trim().split('\n')).toHaveLength(1)
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close
})
