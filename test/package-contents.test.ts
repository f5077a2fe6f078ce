import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { beforeAll, describe, expect, test } from 'vitest'

// What `npm pack` would publish (docs/contract.md §1): the library, its types, the CLI, the
// manifest, README.md and docs/ — no test, benchmark, torture or demo code. Needs dist/ built.

const repo = fileURLToPath(new URL('..', import.meta.url))
let files: string[]

beforeAll(async () => {
  if (!existsSync(join(repo, 'dist', 'index.js'))) throw new Error('dist/ is not built: run `npx tsc -p tsconfig.json` first')
  // --ignore-scripts: listing must not rebuild (prepack); the test looks at the build as it is.
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, maxBuffer: 16 * 1024 * 1024 })
  files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path)
}, 60_000)

describe('the published package', () => {
  test('holds the library, its types, the CLI, the manifest, README.md and docs/', async () => {
    const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8'))
    const required = ['package.json', 'README.md', 'plugin.manifest.json', 'docs/cli.md', 'docs/contract.md', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js']
    for (const entry of Object.values(pkg.exports) as (string | { types: string; import: string })[]) {
      if (typeof entry === 'string') required.push(normalize(entry))
      else required.push(normalize(entry.types), normalize(entry.import))
    }
    required.push(normalize(pkg.bin['session-jsonl']))
    expect(required.filter((f) => !files.includes(f))).toEqual([])
  })

  test('holds no test, benchmark, torture or demo code, no sources and no source maps', () => {
    const unwanted = files.filter(
      (f) =>
        /^(src|test|bench|scripts|\.ci)\//.test(f) ||
        /^dist\/(torture|demo|bench|test)\//.test(f) ||
        /\.(test|spec)\.[cm]?[jt]s$/.test(f) ||
        f.endsWith('.map') ||
        (f.endsWith('.ts') && !f.endsWith('.d.ts')),
    )
    expect(unwanted).toEqual([])
    expect(files.every((f) => /^(dist\/|docs\/|README\.md$|package\.json$|plugin\.manifest\.json$|LICENSE)/.test(f))).toBe(true)
  })

  test('every relative import of a published module resolves to a published file', async () => {
    const published = new Set(files)
    const missing: string[] = []
    for (const f of files.filter((p) => p.endsWith('.js'))) {
      const text = await readFile(join(repo, f), 'utf8')
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
        const target = normalize(join(dirname(f), m[1]!))
        if (!published.has(target)) missing.push(`${f} -> ${m[1]}`)
      }
    }
    expect(missing).toEqual([])
  })
})

describe('installing the repository', () => {
  test('runs no install script of ours and no dependency that builds native code', async () => {
    const pkg = JSON.parse(await readFile(join(repo, 'package.json'), 'utf8'))
    const installHooks = ['preinstall', 'install', 'postinstall', 'prepublish', 'prepare', 'preprepare', 'postprepare']
    expect(installHooks.filter((h) => pkg.scripts?.[h] !== undefined)).toEqual([])
    expect(Object.keys({ ...pkg.dependencies, ...pkg.devDependencies })).not.toContain('better-sqlite3')
    const lock = JSON.parse(await readFile(join(repo, 'package-lock.json'), 'utf8'))
    const withScripts = Object.entries(lock.packages as Record<string, { hasInstallScript?: boolean }>)
      .filter(([, p]) => p.hasInstallScript === true)
      .map(([name]) => name)
    expect(withScripts).toEqual([])
  })
})
