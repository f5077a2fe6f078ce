import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type ListProblem } from '../src/index.js'
import { createFaultInjectingFileSystem } from '../src/testing/index.js'
import { ev, meta, turn } from './helpers/events.js'
import { HEADER, line, writeRawLog } from './helpers/raw-log.js'
import { tmpRoot } from './helpers/tmp-root.js'

describe('list (docs/contract.md §4.6)', () => {
  test('reads one small block per file, never the whole log', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('big'))
    await p.append('big', [ev(0, 'blob', { text: 'y'.repeat(2_000_000) }), ...turn(1, 1)])
    await p.create(meta('small', { createdAt: 1 }))
    await p.append('small', turn(0, 1))
    await p.closeAll()
    fs.calls.length = 0
    const listing = await p.list()
    expect(listing.map((l) => l.meta.id)).toEqual(['big', 'small'])
    expect(listing[0]?.sizeBytes).toBeGreaterThan(2_000_000)
    const reads = fs.calls.filter((c) => c.op === 'read')
    expect(reads).toHaveLength(2)
    expect(reads.every((r) => r.detail === 4096)).toBe(true)
  })

  test('a bad file is reported to onProblem and skipped; temporary, dot and foreign files are ignored', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('good'))
    await p.append('good', turn(0, 1))
    await p.closeAll()
    await writeRawLog(root, 'corrupt', '{"type":"session"\n')
    await writeRawLog(root, 'future', '{"type":"session","version":3,"id":"future","createdAt":1,"delegationDepth":0}\n')
    await writeRawLog(root, 'mismatch', HEADER('other'))
    await writeRawLog(root, 'Bad-Name', HEADER('Bad-Name'))
    await writeRawLog(root, 'empty', '')
    await writeFile(join(root, '_no-cwd', '.tmp-abc'), 'partial')
    await writeFile(join(root, '_no-cwd', 'notes.txt'), 'hello')
    await mkdir(join(root, '.hidden'), { recursive: true })
    await writeFile(join(root, '.hidden', 'x.jsonl'), HEADER('x'))
    await writeFile(join(root, 'stray-file'), 'x')
    const problems: ListProblem[] = []
    const listing = await p.list({ onProblem: (pr) => problems.push(pr) })
    expect(listing.map((l) => l.meta.id)).toEqual(['good'])
    expect(problems.map((pr) => [pr.path.split('/').pop(), pr.code]).sort()).toEqual([
      ['Bad-Name.jsonl', 'E_CORRUPT'],
      ['corrupt.jsonl', 'E_CORRUPT'],
      ['empty.jsonl', 'E_CORRUPT'],
      ['future.jsonl', 'E_FORMAT_UNSUPPORTED'],
      ['mismatch.jsonl', 'E_CORRUPT'],
    ])
  })

  test('without onProblem, problems go to the configured logger', async () => {
    const root = await tmpRoot()
    await writeRawLog(root, 'corrupt', 'nope\n')
    const warnings: string[] = []
    const p = createJsonlPersistence({ root, logger: { warn: (m) => warnings.push(m) } })
    expect(await p.list()).toEqual([])
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('corrupt.jsonl')
  })

  test('a missing root lists nothing; a header-only torn log is still listed', async () => {
    const root = join(await tmpRoot(), 'not-yet')
    expect(await createJsonlPersistence({ root }).list()).toEqual([])
    await writeRawLog(root, 'torn', HEADER('torn') + line(ev(0, 'turn/start')) + '{"seq":1')
    const [l] = await createJsonlPersistence({ root }).list()
    expect(l?.meta).toEqual({ id: 'torn', createdAt: 1000, delegationDepth: 0 })
    expect(l?.location).toEqual({ kind: 'jsonl', path: join(root, '_no-cwd', 'torn.jsonl') })
  })
})
