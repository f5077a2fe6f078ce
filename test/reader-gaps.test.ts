import { appendFile, readFile, writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// Behaviours a mutation run found no test held (each test here fails with the mutant it names):
// read's bisection on uneven lines, watch and a line still without its newline, redact and
// nested keys, migrate of a version-0 line that does not end with `}`.

describe('read on a log of uneven line sizes', () => {
  test('every short range from every seq is exactly that slice (interpolated probes land on both sides of the target)', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, sync: 'none' })
    await p.create(meta('uneven'))
    const pad = (n: number) => 'x'.repeat(n % 7 === 0 ? 30_000 : n % 3 === 0 ? 3000 : 10)
    const events: SessionEvent[] = Array.from({ length: 400 }, (_, n) => ({ seq: n, type: 'x', time: 1, data: { pad: pad(n) } }))
    await p.append('uneven', events)
    await p.close('uneven')
    const r = createJsonlPersistence({ root })
    for (let from = 0; from < 400; from++) {
      const got = await r.read('uneven', { fromSeq: from, toSeq: from + 3 })
      expect(got.events.map((e) => e.seq), `from ${from}`).toEqual([from, from + 1, from + 2].filter((s) => s < 400))
    }
  })
})

describe('watch and a line without its newline', () => {
  for (const version of [0, 1] as const) {
    test(`version ${version}: a complete JSON line not yet ended by \\n is not yielded; once its \\n is written it is, once`, async () => {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, sync: 'none', formatVersion: version })
      await p.create(meta('w'))
      await p.append('w', [{ seq: 0, type: 'x', time: 1 }])
      await p.close('w')
      // The next line as the package writes it (sealed in version 1), from a twin log.
      const twin = await tmpRoot()
      const q = createJsonlPersistence({ root: twin, sync: 'none', formatVersion: version })
      await q.create(meta('w'))
      await q.append('w', [{ seq: 0, type: 'x', time: 1 }, { seq: 1, type: 'x', time: 1 }])
      await q.close('w')
      const next = (await readFile(q.locate(meta('w')).path, 'utf8')).split('\n').at(-2)!
      const path = p.locate(meta('w')).path
      await appendFile(path, next) // an append in flight: its bytes written, its newline not yet
      const stop = new AbortController()
      const seen: number[] = []
      let saw: (() => void) | undefined
      const watching = (async () => {
        for await (const e of createJsonlPersistence({ root }).watch('w', { signal: stop.signal })) {
          seen.push(e.seq)
          saw?.()
        }
      })()
      // Long enough for notifications and the safety poll to see the unfinished line.
      await new Promise((r) => setTimeout(r, 1500))
      expect(seen).toEqual([0])
      const yielded = new Promise<void>((r) => (saw = r))
      await appendFile(path, '\n')
      await yielded
      stop.abort()
      await watching
      expect(seen).toEqual([0, 1])
    })
  }
})

describe('redact and keys', () => {
  test('a nested key that matches the pattern is kept; only the string value is redacted', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('k'))
    await p.append('k', [{ seq: 0, type: 'x', time: 1, data: { 'sk-live-abc': 'value sk-live-abc', deeper: [{ 'sk-live-def': 1 }] } }])
    await p.close('k')
    expect(await p.redact('k', { pattern: /sk-live-[a-z]+/ })).toMatchObject({ matches: 1, rewritten: true })
    expect((await p.load('k')).events[0]!.data).toEqual({ 'sk-live-abc': 'value [REDACTED]', deeper: [{ 'sk-live-def': 1 }] })
    await p.close('k')
  })
})

describe('migrate and a version-0 line that does not end with }', () => {
  test('a line with trailing whitespace is rewritten (re-serialized, sealed) and loads back with the same events', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    await p.create(meta('m'))
    const events: SessionEvent[] = [{ seq: 0, type: 'x', time: 1 }, { seq: 1, type: 'x', time: 1, data: { a: 1 } }]
    await p.append('m', events)
    await p.close('m')
    const path = p.locate(meta('m')).path
    const lines = (await readFile(path, 'utf8')).split('\n')
    lines[1] = `${lines[1]}  `
    await writeFile(path, lines.join('\n'))
    expect(await p.migrate('m')).toMatchObject({ migrated: true })
    const loaded = await p.load('m')
    expect(loaded.events).toEqual(events)
    await p.close('m')
    expect((await readFile(path, 'utf8')).split('\n').slice(1, -1).every((l) => l.endsWith('"}') && l.includes(',"crc":"'))).toBe(true)
  })
})
