import { readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { z } from 'zod'
import { PluginJsonConfigSchema } from '../src/index.js'

test('plugin.manifest.json has exactly the keys of docs/contract.md §8 and its configSchema is generated from the zod schema', async () => {
  const manifest = JSON.parse(await readFile(new URL('../plugin.manifest.json', import.meta.url), 'utf8'))
  const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'))
  expect(Object.keys(manifest)).toEqual(['name', 'version', 'description', 'entry', 'provides', 'subscribes', 'configSchema'])
  expect(manifest.name).toBe('session-persistence-jsonl')
  expect(manifest.version).toBe(pkg.version)
  expect(manifest.entry).toBe(pkg.exports['.'].import)
  expect(manifest.provides).toEqual(['sessionPersistence'])
  expect(manifest.subscribes).toEqual(['session/created', 'session/event', 'session/flush', 'session/disposed'])
  expect(manifest.configSchema.$schema).toBe('https://json-schema.org/draft/2020-12/schema')
  expect(manifest.configSchema).toEqual(z.toJSONSchema(PluginJsonConfigSchema, { io: 'input', target: 'draft-2020-12' }))
  expect(manifest.configSchema.required).toEqual(['root'])
})
