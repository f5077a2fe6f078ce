import { fileURLToPath } from 'node:url'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'

const dist = fileURLToPath(new URL('../dist/', import.meta.url))

test('the exports map resolves each entry point to dist/, types first', async () => {
  const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8'))
  for (const entry of ['.', './testing', './contract', './postgres', './ai-sdk', './openai-agents']) {
    expect(Object.keys(pkg.exports[entry])).toEqual(['types', 'import'])
  }
  expect(pkg.bin['session-jsonl']).toBe('./dist/cli/main.js')
  // Self-reference by package name goes through the exports map, as a consumer's import would.
  const main = await import('session-persistence-jsonl')
  const testing = await import('session-persistence-jsonl/testing')
  expect(typeof main.createJsonlPersistence).toBe('function')
  expect(typeof main.sessionPersistencePlugin).toBe('function')
  expect(typeof testing.createReferenceHost).toBe('function')
  expect(typeof testing.createCrashFileSystem).toBe('function')
})

test('session-persistence-jsonl/testing never imports vitest (usable without it); only /contract does', async () => {
  const files = async (dir: string): Promise<string[]> => {
    const out: string[] = []
    for (const e of await readdir(dir, { withFileTypes: true })) {
      if (e.isDirectory()) out.push(...(await files(join(dir, e.name))))
      else if (e.name.endsWith('.js')) out.push(join(dir, e.name))
    }
    return out
  }
  const importingVitest: string[] = []
  for (const f of await files(dist)) if (/from ['"]vitest['"]/.test(await readFile(f, 'utf8'))) importingVitest.push(f.slice(dist.length))
  expect(importingVitest.length).toBeGreaterThan(0)
  expect(importingVitest.filter((f) => !f.startsWith('contract/'))).toEqual([])
  // the testing entry point's own modules, and everything they import, stay free of vitest
  const testingEntry = await readFile(join(dist, 'testing', 'index.js'), 'utf8')
  expect(testingEntry).not.toMatch(/contract\//)
})
