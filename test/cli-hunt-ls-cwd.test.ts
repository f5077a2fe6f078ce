import { resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A stored cwd is kept exactly as given (SPEC §3): '/proj/' and '/proj' are two buckets. `ls
// --cwd PATH` keeps a session whose cwd is PATH exactly as typed, or PATH resolved (absolute,
// normalised: what a shell's $PWD is; a stored cwd is always absolute, §2), so that any stored cwd can be selected by typing it, and
// a project's sessions by its directory however it is written.

const STORED: [string, string][] = [
  ['s1', '/proj/'],
  ['s2', '/proj'],
  ['s3', '/proj/./sub/..'],
  ['s4', '/other'],
  ['s5', resolve('rel/dir')],
]

describe('ls --cwd', () => {
  test('regression: keeps the sessions whose stored cwd is the argument as given or its resolved form, with and without --limit', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    for (const [i, [id, cwd]] of STORED.entries()) {
      await p.create(meta(id, { cwd, createdAt: 1_700_000_000_000 + i }))
      await p.append(id, turn(0, 1))
    }
    await p.closeAll()
    const ids = async (...args: string[]) => {
      const r = await cli(['--root', root, 'ls', ...args, '--json'])
      expect(r.result).toBe(0)
      return (JSON.parse(r.out).sessions as { meta: { id: string } }[]).map((s) => s.meta.id).sort()
    }
    const cases: [string, string[]][] = [
      ['/proj/', ['s1', 's2']],
      ['/proj', ['s2']],
      ['/proj/./sub/..', ['s2', 's3']],
      ['/proj//', ['s2']],
      ['/other', ['s4']],
      ['rel/dir', ['s5']], // relative to the CLI's working directory, as a shell's path is
      ['/nowhere', []],
    ]
    for (const [given, expected] of cases) {
      expect({ given, ids: await ids('--cwd', given) }).toEqual({ given, ids: expected })
      expect({ given, limited: await ids('--cwd', given, '--limit', '10') }).toEqual({ given, limited: expected })
    }
    const table = await cli(['--root', root, 'ls', '--cwd', '/proj/'])
    expect(table.out.split('\n').slice(1, -1).map((l) => l.split(/\s+/).slice(0, 1).concat(l.split(/\s+/)[3]!))).toEqual([['s2', '/proj'], ['s1', '/proj/']])
  })
})
