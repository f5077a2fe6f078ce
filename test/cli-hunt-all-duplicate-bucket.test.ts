import { copyFile, mkdir, readdir, utimes } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// One id stored in two buckets (§3.1: a copy put there by hand) is listed twice, once per log.
// The commands over every session (migrate --all, copy --all, prune) act on each id once: the
// store refuses that id (E_AMBIGUOUS), said once and counted once, and prune's dry run says so
// as the real run will, not that it would remove it (twice).

const DAY = 86_400_000

/** A version-0 root with 'd' (in its cwd bucket and copied into _no-cwd) and 'e', both last written 40 days ago. */
async function rootWithDuplicate(): Promise<string> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 0 })
  for (const id of ['d', 'e']) {
    await p.create(meta(id, { cwd: '/proj' }))
    await p.append(id, turn(0, 1))
  }
  await p.closeAll()
  const d = p.locate(meta('d', { cwd: '/proj' })).path
  await mkdir(join(root, '_no-cwd'), { recursive: true })
  await copyFile(d, join(root, '_no-cwd', 'd.jsonl'))
  const old = new Date(Date.now() - 40 * DAY)
  for (const dir of ['_no-cwd', dirname(d).split('/').pop()!]) {
    for (const name of await readdir(join(root, dir))) await utimes(join(root, dir, name), old, old)
  }
  return root
}

const ambiguous = (err: string) => err.split('\n').filter((l) => /\bd: E_AMBIGUOUS: session 'd' exists in 2 buckets: /.test(l))

describe('commands over every session and one id in two buckets', () => {
  test('regression: migrate --all refuses the id once and counts it once', async () => {
    const root = await rootWithDuplicate()
    for (const dry of [['--dry-run'], []]) {
      const r = await cli(['--root', root, 'migrate', '--all', ...dry])
      expect(r.result).toBe(1)
      expect(ambiguous(r.err)).toHaveLength(1)
      expect(r.out).toMatch(new RegExp(`\\nmigrate: 1 ${dry.length ? 'would be done' : 'done'}, 0 unchanged, 0 skipped, 1 refused\\n$`))
      // Read after each run: e is version 0 before the real run and version 1 after it.
      const json = JSON.parse((await cli(['--root', root, 'migrate', '--all', '--dry-run', '--json'])).out)
      expect(json.migrate.map((o: { id: string; status: string; code?: string }) => [o.id, o.status, o.code])).toEqual([
        ['d', 'refused', 'E_AMBIGUOUS'],
        ['e', dry.length ? 'would-do' : 'unchanged', undefined],
      ])
    }
  })

  test('regression: copy --all fails the id once and counts it once', async () => {
    const root = await rootWithDuplicate()
    const to = await tmpRoot()
    const r = await cli(['--root', root, 'copy', '--all', '--to', to])
    expect(r.result).toBe(1)
    expect(ambiguous(r.err)).toHaveLength(1)
    expect(r.out).toMatch(/\ncopied 1 of 2 session\(s\) to .*; 1 failed\n$/)
    expect([...(await rootFiles(to)).keys()].map((k) => k.split('/')[1])).toEqual(['e.jsonl'])
  })

  test('regression: prune considers the id once; its dry run reports it skipped E_AMBIGUOUS as the real run does', async () => {
    const root = await rootWithDuplicate()
    const before = await rootFiles(root)
    const dry = await cli(['--root', root, 'prune', '--older-than', '30d', '--dry-run'])
    const real = await cli(['--root', root, 'prune', '--older-than', '30d'])
    for (const [r, verb] of [[dry, 'would remove'], [real, 'removed']] as const) {
      expect(r.result).toBe(1) // an E_AMBIGUOUS skip is a failure: the operator must choose a copy
      expect(ambiguous(r.err)).toHaveLength(1)
      expect(r.out.split('\n').filter((l) => l.startsWith(`${verb} `)).map((l) => l.split(' ').slice(0, verb.split(' ').length + 1).join(' '))).toEqual([`${verb} e`, `${verb} 1`])
      expect(r.out).toMatch(/; 1 skipped\n$/)
    }
    expect([...(await rootFiles(root)).keys()].sort()).toEqual([...before.keys()].filter((k) => !k.endsWith('/e.jsonl')).sort())
  })
})
