import { readFile, writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// docs/cli.md, copy: "Ids that exist at the target … are refused before anything is copied".
// A log at the target whose header is damaged is not listed, but it is there (a copy onto it
// fails E_EXISTS): it counts as existing, so the copy is refused before any session is copied.

async function rootWith(ids: string[]): Promise<{ root: string; paths: Record<string, string> }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  const paths: Record<string, string> = {}
  for (const id of ids) {
    await p.create(meta(id, { cwd: '/proj' }))
    await p.append(id, [...turn(0, 1), ...turn(4, 2)])
    paths[id] = p.locate(meta(id, { cwd: '/proj' })).path
  }
  await p.closeAll()
  return { root, paths }
}

describe('copy and a target log that cannot be listed', () => {
  test('regression: an id present at the target only as a log with a damaged header is refused (E_EXISTS) before anything is copied; --skip-existing skips it', async () => {
    const { root: from } = await rootWith(['x', 'y'])
    const { root: to, paths } = await rootWith(['x'])
    const damaged = (await readFile(paths.x!, 'utf8')).replace('"session"', '"sessio"')
    await writeFile(paths.x!, damaged)
    const before = await rootFiles(to)

    const refused = await cli(['--root', from, 'copy', 'y', 'x', '--to', to])
    expect(refused.result).toBe('E_EXISTS')
    expect(refused.out).toBe('')
    expect(refused.err).toMatch(/^1 session\(s\) already exist at .*: x; pass --skip-existing to copy the others$/)
    expect(await rootFiles(to)).toEqual(before) // y was not copied

    const skipped = JSON.parse((await cli(['--root', from, 'copy', 'y', 'x', '--to', to, '--skip-existing', '--json'])).out)
    expect(skipped.copied.map((c: { id: string }) => c.id)).toEqual(['y'])
    expect(skipped.skipped.map((s: { id: string; code: string }) => [s.id, s.code])).toEqual([['x', 'E_EXISTS']])
    expect(skipped.failed).toEqual([])
    expect((await rootFiles(to)).get([...before.keys()][0]!)!.toString('utf8')).toBe(damaged) // left as it was
  })
})
