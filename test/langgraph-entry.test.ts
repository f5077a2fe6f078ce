// LangGraph is an optional peer: the main entry, the CLI (with its LangGraph renderer) and the
// other entry points never load @langchain/*; only session-persistence-jsonl/langgraph does.
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const src = fileURLToPath(new URL('../src/', import.meta.url))

/** The runtime (non-type) imports of a source file. */
function runtimeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  const out: string[] = []
  for (const m of text.matchAll(/^(import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)) {
    if (m[2] === undefined) out.push(m[3]!)
  }
  for (const m of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]!)
  return out
}

/** Files reached from `entry` through runtime imports, and the packages they load. */
function graph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    for (const spec of runtimeImports(file)) {
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec.replace(/\.js$/, '.ts')))
      else packages.add(spec)
    }
  }
  visit(entry)
  return { files, packages }
}

const langchain = (packages: Set<string>) => [...packages].filter((p) => p.startsWith('@langchain/'))

describe('where LangGraph is loaded', () => {
  it.each([['index.ts'], ['cli/main.ts'], ['testing/index.ts'], ['postgres/index.ts']])('never from %s', (entry) => {
    const { files, packages } = graph(join(src, entry))
    expect(files.size).toBeGreaterThan(1)
    expect(langchain(packages)).toEqual([])
    expect([...files].filter((f) => f.includes(join('adapters', 'langgraph')))).toEqual([])
  })

  it('from session-persistence-jsonl/langgraph, which needs only the checkpoint package at run time', () => {
    const { packages } = graph(join(src, 'adapters', 'langgraph', 'index.ts'))
    expect(langchain(packages)).toEqual(['@langchain/langgraph-checkpoint'])
  })

  it('and the CLI renderer of its events is reached from the CLI without it', () => {
    const { files } = graph(join(src, 'cli', 'main.ts'))
    expect(files.has(join(src, 'cli', 'render-langgraph.ts'))).toBe(true)
  })
})
