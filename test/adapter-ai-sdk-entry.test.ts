// The AI SDK is an optional peer: the package's main entry must never load it, and the adapter
// itself refers to it for types only (so importing the adapter loads nothing of `ai` either).
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const src = fileURLToPath(new URL('../src/', import.meta.url))

interface Specifier {
  from: string
  spec: string
  typeOnly: boolean
}

/** Every import and re-export of a source file, with whether it is erased at compile time. */
function importsOf(file: string): Specifier[] {
  const text = readFileSync(file, 'utf8')
  const out: Specifier[] = []
  const re = /^(import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm
  for (const m of text.matchAll(re)) out.push({ from: file, spec: m[3]!, typeOnly: m[2] !== undefined })
  for (const m of text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push({ from: file, spec: m[1]!, typeOnly: false })
  return out
}

/** The runtime import graph from `entry`: files reached and bare specifiers loaded. */
function runtimeGraph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (files.has(file)) return
    files.add(file)
    for (const { spec, typeOnly } of importsOf(file)) {
      if (typeOnly) continue
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec.replace(/\.js$/, '.ts')))
      else packages.add(spec)
    }
  }
  visit(entry)
  return { files, packages }
}

const isAi = (spec: string) => spec === 'ai' || spec.startsWith('ai/') || spec.startsWith('@ai-sdk/')

describe('the ai-sdk entry point', () => {
  it('is not reachable from the main entry, which loads no AI SDK module', () => {
    const { files, packages } = runtimeGraph(join(src, 'index.ts'))
    expect(files.size).toBeGreaterThan(5)
    expect([...files].filter((f) => f.includes(join('adapters', 'ai-sdk')))).toEqual([])
    expect([...packages].filter(isAi)).toEqual([])
  })

  it('refers to the AI SDK for types only', () => {
    const { files, packages } = runtimeGraph(join(src, 'adapters', 'ai-sdk', 'index.ts'))
    expect([...packages].filter(isAi)).toEqual([])
    const typeImports = [...files].flatMap(importsOf).filter((s) => isAi(s.spec))
    expect(typeImports.length).toBeGreaterThan(0) // the check above looked at real imports
    expect(typeImports.every((s) => s.typeOnly)).toBe(true)
  })
})
