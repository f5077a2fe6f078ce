import { readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

test('a created session round-trips through append, close and load', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 0 })
  await p.create(meta('s1', { cwd: '/proj' }))
  await p.append('s1', turn(0, 1))
  await p.append('s1', turn(4, 2))
  await p.close('s1')
  const loc = p.locate(meta('s1', { cwd: '/proj' }))
  const text = await readFile(loc.path, 'utf8')
  expect(text.split('\n')[0]).toBe('{"type":"session","version":0,"id":"s1","cwd":"/proj","createdAt":1700000000000,"delegationDepth":0}')
  const loaded = await p.load('s1')
  expect(loaded.events).toHaveLength(8)
  expect(loaded.repair).toBeUndefined()
  await p.closeAll()
})
