import { readdir } from 'node:fs/promises'
import { dirname, join, relative, sep } from 'node:path'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, decodeSessionId, encodeSessionId, isSessionPersistenceError } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

const codeOf = (fn: () => unknown) => {
  try {
    fn()
    return 'returned'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : String(err)
  }
}

describe('session id encoding (docs/contract.md §3.2)', () => {
  test('keeps [a-z0-9_-] and escapes every other UTF-8 byte as %XX uppercase', () => {
    expect(encodeSessionId('abc-0_9')).toBe('abc-0_9')
    expect(encodeSessionId('A')).toBe('%41')
    expect(encodeSessionId('.')).toBe('%2E')
    expect(encodeSessionId('..')).toBe('%2E%2E')
    expect(encodeSessionId('a/b\\c')).toBe('a%2Fb%5Cc')
    expect(encodeSessionId('\0')).toBe('%00')
    expect(encodeSessionId('%')).toBe('%25')
    expect(encodeSessionId('é')).toBe('%C3%A9')
    expect(encodeSessionId('🦀')).toBe('%F0%9F%A6%80')
  })

  test('empty ids, lone surrogates and encodings over 244 bytes are E_INVALID_ID', () => {
    expect(codeOf(() => encodeSessionId(''))).toBe('E_INVALID_ID')
    expect(codeOf(() => encodeSessionId('a\uD800b'))).toBe('E_INVALID_ID')
    expect(codeOf(() => encodeSessionId('\uDC00'))).toBe('E_INVALID_ID')
    expect(encodeSessionId('x'.repeat(244))).toHaveLength(244)
    expect(codeOf(() => encodeSessionId('x'.repeat(245)))).toBe('E_INVALID_ID')
    expect(encodeSessionId('A'.repeat(81)).length).toBe(243)
    expect(codeOf(() => encodeSessionId('A'.repeat(82)))).toBe('E_INVALID_ID') // 246 bytes
  })

  test('property: decode inverts encode; names stay one safe segment; no two ids collide, even case-folded', () => {
    const seen = new Map<string, string>()
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (id) => {
        // Forty graphemes can be far more than 244 encoded bytes (a grapheme may be many code points).
        const encodedBytes = [...Buffer.from(id, 'utf8')].reduce((n, b) => n + (/[a-z0-9_-]/.test(String.fromCharCode(b)) ? 1 : 3), 0)
        if (encodedBytes > 244) {
          expect(() => encodeSessionId(id)).toThrow(expect.objectContaining({ code: 'E_INVALID_ID' }))
          return
        }
        const name = encodeSessionId(id)
        expect(decodeSessionId(name)).toBe(id)
        expect(name).toMatch(/^[a-z0-9_%A-F-]+$/)
        expect(name === '.' || name === '..' || name.includes('/') || name.includes('\\')).toBe(false)
        const folded = name.toLowerCase()
        const other = seen.get(folded)
        if (other !== undefined) expect(other).toBe(id)
        seen.set(folded, id)
      }),
      { numRuns: 3000 },
    )
  })

  test('decode refuses names this package never writes', () => {
    for (const bad of ['A', '%2e', '%61', '%G0', '%4', '.', 'a.jsonl', '%FF']) expect(decodeSessionId(bad)).toBeUndefined()
  })

  test('hostile ids never leave their bucket and never collide on disk; 244 bytes work end to end', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    const ids = ['..', '.', '/', '\\', '\0', '%', '%2E', 'Ab', 'ab', 'AB', '🦀', '../../etc/passwd', 'x'.repeat(244), 'é'.repeat(40)]
    for (const id of ids) {
      const m = meta(id, { cwd: '/proj' })
      const { path } = p.locate(m)
      expect(dirname(path)).toBe(dirname(p.locate(meta('plain', { cwd: '/proj' })).path))
      expect(relative(root, path).split(sep)).toHaveLength(2)
      await p.create(m)
      await p.append(id, turn(0, 1))
      await p.close(id)
    }
    const bucket = dirname(p.locate(meta('plain', { cwd: '/proj' })).path)
    expect((await readdir(bucket)).sort()).toHaveLength(ids.length)
    for (const id of ids) expect((await p.load(id)).meta.id).toBe(id)
    await p.closeAll()
    expect((await p.list()).map((l) => l.meta.id).sort()).toEqual([...ids].sort())
    expect(await readdir(join(root, '.locks'))).toEqual([]) // every lock released
  })
})

describe('temporary names and lock tokens', () => {
  test('are never repeated, start with .tmp-, and stay short', async () => {
    const { tmpName, uniqueToken } = await import('../src/jsonl/paths.js')
    const names = Array.from({ length: 10_000 }, () => tmpName())
    expect(new Set(names).size).toBe(names.length)
    for (const name of names) expect(name).toMatch(/^\.tmp-[0-9a-f]{24}[0-9a-z]+$/)
    expect(Math.max(...names.map((n) => n.length))).toBeLessThanOrEqual(40)
    const tokens = Array.from({ length: 1_000 }, () => uniqueToken())
    expect(new Set([...tokens, ...names.map((n) => n.slice('.tmp-'.length))]).size).toBe(tokens.length + names.length)
  })

  test('differ between processes (a random part per process, not only a counter)', async () => {
    const { execFileSync } = await import('node:child_process')
    const script = "import('./dist/jsonl/paths.js').then((m) => console.log(m.tmpName()))"
    const a = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim()
    const b = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim()
    expect(a).toMatch(/^\.tmp-/)
    expect(a).not.toBe(b)
  })
})
