import { readFile, writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A header that an older release accepted with a field nested thousands of levels deep (create
// now refuses more than 100: the contract checks that): the readers check line 1 without walking
// what JSON.parse gave them, so such a log still lists, loads and reads (it ran zod out of stack:
// E_IO on load, a listing problem).
describe('a header nested thousands of levels deep', () => {
  test('regression: lists, loads and reads, its meta as written', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    await p.create(meta('deep'))
    const events = turn(0, 1)
    await p.append('deep', events)
    await p.closeAll()
    const path = p.locate(meta('deep')).path
    const [header, ...rest] = (await readFile(path, 'utf8')).split('\n')
    const deep = `${'['.repeat(3000)}1${']'.repeat(3000)}`
    await writeFile(path, [`${header!.slice(0, -1)},"deep":${deep}}`, ...rest].join('\n'))

    const fresh = createJsonlPersistence({ root })
    const problems: unknown[] = []
    expect((await fresh.list({ onProblem: (pr) => problems.push(pr) })).map((l) => l.meta.id)).toEqual(['deep'])
    expect(problems).toEqual([])
    const loaded = await fresh.load('deep')
    expect(JSON.stringify(loaded.meta.deep)).toBe(deep)
    expect(loaded.events).toEqual(events)
    expect((await fresh.read('deep', { last: 2 })).events).toEqual(events.slice(-2))
    await fresh.closeAll()
  })
})
