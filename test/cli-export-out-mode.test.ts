import { readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import type { Io } from '../src/cli/commands.js'
import { main } from '../src/cli/main.js'
import { makeStyle } from '../src/cli/render.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `export --out FILE` wrote the transcript with 0666 & ~umask: world-readable under umask 022,
// though session data files are 0600 whatever the umask (SPEC §5).
async function cli(args: string[]): Promise<number> {
  const io: Io = { out: () => {}, err: () => {}, style: makeStyle(false), progress: undefined }
  return main(args, {}, io)
}

test.skipIf(process.platform === 'win32')('export --out writes a 0600 file under a permissive umask, and tightens a file it overwrites', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('s1'))
  await p.append('s1', turn(0, 1))
  await p.closeAll()
  const fresh = join(root, 'fresh.json')
  const existing = join(root, 'existing.json')
  const before = process.umask(0o022)
  try {
    await writeFile(existing, 'old text, longer than nothing', { mode: 0o644 })
    expect((await stat(existing)).mode & 0o777).toBe(0o644)
    for (const out of [fresh, existing]) {
      expect(await cli(['--root', root, 'export', 's1', '--format', 'json', '--out', out])).toBe(0)
      expect([out, (await stat(out)).mode & 0o7777]).toEqual([out, 0o600])
      expect(JSON.parse(await readFile(out, 'utf8'))).toBeTruthy() // the transcript itself, whole
    }
    process.umask(0o000)
    const loose = join(root, 'loose.md')
    expect(await cli(['--root', root, 'export', 's1', '--format', 'md', '--out', loose])).toBe(0)
    expect((await stat(loose)).mode & 0o7777).toBe(0o600)
  } finally {
    process.umask(before)
  }
})
