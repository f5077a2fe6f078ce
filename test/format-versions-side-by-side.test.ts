import { readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §16 "Both versions, forever": version-0 and version-1 logs side by side in one root.

const versionOf = async (path: string) => (JSON.parse((await readFile(path, 'utf8')).split('\n')[0]!.replace(/,"crc":"[0-9a-f]{8}"\}$/, '}')) as { version: number }).version

test('one root holds both versions: each loads and appends in its own version, forks keep their parent\'s, list and verify show both', async () => {
  const root = await tmpRoot()
  const old = createJsonlPersistence({ root, formatVersion: 0 })
  await old.create(meta('v0', { createdAt: 2 }))
  await old.append('v0', turn(0, 1))
  await old.close('v0')
  const p = createJsonlPersistence({ root }) // default: version 1
  await p.create(meta('v1', { createdAt: 1 }))
  await p.append('v1', turn(0, 1))
  await p.close('v1')
  // a version-1 instance appends to the version-0 log in version 0, and forks keep the parent's version
  await p.load('v0')
  await p.append('v0', turn(4, 2))
  await p.close('v0')
  await p.fork('v0', { id: 'f0', seedLength: 4 })
  await p.fork('v1', { id: 'f1', seedLength: 4 })
  await p.closeAll()
  await old.fork('v1', { id: 'f1-by-v0-writer', seedLength: 4 })
  await old.closeAll()
  const where = (id: string) => p.locate(meta(id)).path
  expect(await versionOf(where('v0'))).toBe(0)
  expect((await readFile(where('v0'), 'utf8')).includes('"crc"')).toBe(false)
  expect(await versionOf(where('v1'))).toBe(1)
  expect(await versionOf(where('f0'))).toBe(0)
  expect(await versionOf(where('f1'))).toBe(1)
  expect(await versionOf(where('f1-by-v0-writer'))).toBe(1)
  expect((await p.inspect('v0')).events).toHaveLength(8)
  expect((await p.list()).map((l) => l.meta.id).sort()).toEqual(['f0', 'f1', 'f1-by-v0-writer', 'v0', 'v1'])

  const verify = await runCli(['--root', root, 'verify', '--json'])
  expect(verify.code).toBe(0)
  expect(JSON.stringify(JSON.parse(verify.stdout))).not.toMatch(/"status":"(corrupt|unsupported)"/)

  // copy both ways between roots: byte-identical, each in its own version
  const other = await tmpRoot()
  expect((await runCli(['--root', root, 'copy', '--all', '--to', other])).code).toBe(0)
  const back = await tmpRoot()
  expect((await runCli(['--root', other, 'copy', '--all', '--to', back])).code).toBe(0)
  for (const id of ['v0', 'v1', 'f0', 'f1']) {
    const copy = createJsonlPersistence({ root: back }).locate(meta(id)).path
    expect(await readFile(copy)).toEqual(await readFile(where(id)))
  }
})
