import { readFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A dry run of migrate or redact that finds work reports it as work: a script reading the
// summary line or the --json statuses of a dry run must not conclude that nothing needs doing.

async function sessions(root: string, version: 0 | 1, ids: string[], content = 'question') {
  const p = createJsonlPersistence({ root, formatVersion: version })
  for (const id of ids) {
    await p.create(meta(id))
    await p.append(id, turn(0, 1).map((e) => (e.type === 'user/message' ? { ...e, data: { content: `${content} ${id}` } } : e)))
    await p.close(id)
  }
  return (id: string) => p.locate(meta(id)).path
}

async function bytes(paths: string[]): Promise<string[]> {
  return Promise.all(paths.map((p) => readFile(p, 'utf8')))
}

describe('migrate and redact --dry-run: the summary counts what would be done', () => {
  test('migrate --dry-run: version-0 logs would be done, a version-1 log unchanged; nothing written; then the run does them', async () => {
    const root = await tmpRoot()
    const v0 = await sessions(root, 0, ['a', 'b', 'c'])
    const v1 = await sessions(root, 1, ['new'])
    const paths = [v0('a'), v0('b'), v0('c'), v1('new')]
    const before = await bytes(paths)

    const dry = await runCli(['--root', root, 'migrate', '--all', '--dry-run'])
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout.split('\n').sort()).toEqual(
      [
        '',
        'a: version 0, 4 events: would be rewritten as version 1',
        'b: version 0, 4 events: would be rewritten as version 1',
        'c: version 0, 4 events: would be rewritten as version 1',
        'new: already version 1',
        'migrate: 3 would be done, 1 unchanged, 0 skipped, 0 refused',
      ].sort(),
    )
    expect(dry.stdout.endsWith('migrate: 3 would be done, 1 unchanged, 0 skipped, 0 refused\n')).toBe(true)
    const json = await runCli(['--root', root, 'migrate', '--all', '--dry-run', '--json'])
    const outcomes = JSON.parse(json.stdout).migrate as { id: string; status: string }[]
    expect(Object.fromEntries(outcomes.map((o) => [o.id, o.status]))).toEqual({ a: 'would-do', b: 'would-do', c: 'would-do', new: 'unchanged' })
    expect(await bytes(paths)).toEqual(before)

    const run = await runCli(['--root', root, 'migrate', '--all'])
    expect(run.stdout.endsWith('migrate: 3 done, 1 unchanged, 0 skipped, 0 refused\n')).toBe(true)
  })

  test('redact --dry-run: a log with matches would be done, one without unchanged; --json keeps its keys', async () => {
    const root = await tmpRoot()
    const pathOf = await sessions(root, 1, ['s'], 'token ghp_abc')
    await sessions(root, 1, ['clean'])
    const before = await bytes([pathOf('s'), pathOf('clean')])

    const dry = await runCli(['--root', root, 'redact', 's', 'clean', '--pattern', 'ghp_[a-z]+', '--dry-run'])
    expect(dry).toEqual({ code: 0, stderr: '', stdout: 's: 1 match(es) in 1 event(s) (seq 1) would be redacted\nclean: no match\nredact: 1 would be done, 1 unchanged, 0 skipped, 0 refused\n' })
    const json = await runCli(['--root', root, 'redact', 's', 'clean', '--pattern', 'ghp_[a-z]+', '--dry-run', '--json'])
    expect(JSON.parse(json.stdout)).toEqual({
      redact: [
        { id: 's', status: 'would-do', matches: 1, seqs: [1] },
        { id: 'clean', status: 'unchanged', matches: 0, seqs: [] },
      ],
    })
    expect(await bytes([pathOf('s'), pathOf('clean')])).toEqual(before)

    const run = await runCli(['--root', root, 'redact', 's', 'clean', '--pattern', 'ghp_[a-z]+', '--json'])
    expect((JSON.parse(run.stdout).redact as { status: string }[]).map((o) => o.status)).toEqual(['done', 'unchanged'])
  })
})
