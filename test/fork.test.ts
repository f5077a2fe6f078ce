import { readFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { ev, meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { codeOf } from './helpers/codes.js'

async function parentWithTwoTurns() {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('parent', { cwd: '/proj', delegationDepth: 1, model: 'x' }))
  const events = [...turn(0, 1), ...turn(4, 2), ev(8, 'turn/start', { turn: 3 })]
  await p.append('parent', events)
  const parentPath = p.locate(meta('parent', { cwd: '/proj' })).path
  return { root, p, events, parentPath, parentBytes: await readFile(parentPath) }
}

describe('fork (docs/contract.md §4.7)', () => {
  test('the child starts with a byte-for-byte copy of the seed, durable and open for appends; the parent is untouched', async () => {
    const { p, events, parentPath, parentBytes } = await parentWithTwoTurns()
    const child = await p.fork('parent', { id: 'child', seedLength: 4, createdAt: 42 })
    expect(child).toEqual({ id: 'child', createdAt: 42, cwd: '/proj', parentSession: 'parent', seedLength: 4, delegationDepth: 1 })
    const childPath = p.locate(child).path
    const childText = await readFile(childPath, 'utf8')
    const parentLines = parentBytes.toString('utf8').split('\n')
    expect(childText.split('\n').slice(1, 5)).toEqual(parentLines.slice(1, 5))
    const more = turn(4, 7)
    await p.append('child', more)
    await p.closeAll()
    expect(await readFile(parentPath)).toEqual(parentBytes)
    const loaded = await p.load('child')
    expect(loaded.events).toEqual([...events.slice(0, 4), ...more])
    expect(loaded.meta.parentSession).toBe('parent')
    await p.closeAll()
  })

  test('seedLength 0 writes nothing until the first append; cwd can be overridden', async () => {
    const { p, root } = await parentWithTwoTurns()
    const child = await p.fork('parent', { id: 'empty-child', seedLength: 0, cwd: '/elsewhere' })
    expect(child.cwd).toBe('/elsewhere')
    expect((await p.list()).map((l) => l.meta.id)).toEqual(['parent'])
    await p.append('empty-child', turn(0, 1))
    await p.closeAll()
    expect((await createJsonlPersistence({ root }).inspect('empty-child')).meta.seedLength).toBe(0)
  })

  test('forks of forks follow lineage through parentSession', async () => {
    const { p } = await parentWithTwoTurns()
    await p.fork('parent', { id: 'c1', seedLength: 8 })
    await p.append('c1', turn(8, 3))
    const grandchild = await p.fork('c1', { id: 'c2', seedLength: 12 })
    expect(grandchild.parentSession).toBe('c1')
    const loaded = await p.inspect('c2')
    expect(loaded.events.map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    await p.closeAll()
  })

  test('bad fork points and existing ids are refused', async () => {
    const { p } = await parentWithTwoTurns()
    expect(await codeOf(p.fork('parent', { id: 'f', seedLength: 3 }))).toBe('E_BAD_FORK_POINT')
    expect(await codeOf(p.fork('parent', { id: 'f', seedLength: 9 }))).toBe('E_BAD_FORK_POINT')
    expect(await codeOf(p.fork('parent', { id: 'f', seedLength: 12 }))).toBe('E_BAD_FORK_POINT')
    expect(await codeOf(p.fork('parent', { id: 'f', seedLength: -1 }))).toBe('E_INVALID_META')
    expect(await codeOf(p.fork('parent', { id: 'parent', seedLength: 4 }))).toBe('E_EXISTS')
    expect(await codeOf(p.fork('missing', { id: 'f', seedLength: 0 }))).toBe('E_NOT_FOUND')
    expect(await codeOf(p.fork('parent', { id: '', seedLength: 0 }))).toBe('E_INVALID_ID')
    await p.fork('parent', { id: 'f', seedLength: 8 })
    expect(await codeOf(p.fork('parent', { id: 'f', seedLength: 4 }))).toBe('E_EXISTS')
    await p.closeAll()
    expect(await codeOf(createJsonlPersistence({ root: p.root }).fork('parent', { id: 'f', seedLength: 4 }))).toBe('E_EXISTS')
    expect((await p.list()).map((l) => l.meta.id).sort()).toEqual(['f', 'parent'])
  })

  test('the fork point is checked against what is stored, not against a torn tail', async () => {
    const { p, parentPath } = await parentWithTwoTurns()
    await p.closeAll()
    const { appendFile } = await import('node:fs/promises')
    await appendFile(parentPath, '{"seq":9,"type":"turn/end","ti') // torn: not stored
    expect(await codeOf(p.fork('parent', { id: 'x', seedLength: 10 }))).toBe('E_BAD_FORK_POINT')
    await p.fork('parent', { id: 'y', seedLength: 8 })
    await p.closeAll()
  })
})
