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

describe('closers and a call id reused in a later turn', () => {
  test('a call id an earlier turn answered, called again in the turn a crash left open, gets its interrupted result', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('reuse'))
    const call = (seq: number, turn: number): SessionEvent => ({ seq, type: 'tool/call', time: 1, data: { turn, step: 0, callId: 'call_0', name: 'bash', arguments: {} } })
    await p.append('reuse', [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      call(1, 1),
      { seq: 2, type: 'tool/result', time: 1, data: { turn: 1, step: 0, callId: 'call_0', content: [{ type: 'text', text: 'ok' }] } },
      { seq: 3, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } },
      { seq: 4, type: 'turn/start', time: 1, data: { turn: 2 } },
      call(5, 2), // the same id, numbered per turn as some providers do; then the crash
    ])
    await p.closeAll()
    const loaded = await createJsonlPersistence({ root }).inspect('reuse')
    expect(loaded.events.slice(6).map((e) => [e.type, (e.data as { callId?: string; reason?: { kind: string } }).callId ?? (e.data as { reason: { kind: string } }).reason.kind])).toEqual([
      ['tool/result', 'call_0'],
      ['turn/end', 'interrupted'],
    ])
  })
})

describe("a load's repair cut, made durable", () => {
  test('a torn tail after a committed turn/end (no closers to write): once the load resolves, every crash state holds the log cut', async () => {
    const { createCrashFileSystem } = await import('../src/testing/crash-fs.js')
    const { basename, dirname } = await import('node:path')
    const disk = createCrashFileSystem()
    const p = createJsonlPersistence({ root: '/r', fs: disk })
    await p.create(meta('t'))
    const events: SessionEvent[] = [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      { seq: 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } },
    ]
    await p.append('t', events)
    await p.closeAll()
    const path = p.locate(meta('t')).path
    // A torn line that reached the disk (durable) before the crash.
    const h = await disk.open(path, 'r+')
    const size = (await h.stat()).size
    const torn = Buffer.from('{"seq":2,"type":"user/mess')
    await h.write(torn, 0, torn.length, size)
    await h.sync()
    await h.close()
    const loaded = await createJsonlPersistence({ root: '/r', fs: disk }).load('t')
    expect(loaded.events).toEqual(events)
    expect(loaded.repair).toMatchObject({ truncatedAtByte: size, closers: [], persisted: true })
    const images = disk.crashImages()
    expect(images.length).toBeGreaterThan(0)
    for (const image of images) {
      const ino = image.dirs.get(dirname(path))?.get(basename(path))
      expect(ino).toBeDefined()
      expect(image.files.get(ino!)!.length).toBe(size)
    }
  })
})

describe('version 1: checksum damage after a crash defect', () => {
  test('a complete line failing its checksum after zeros (past the last turn/end) is E_CORRUPT at that line, not cut with the torn tail; the file untouched', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('z'))
    const events: SessionEvent[] = [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      { seq: 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } },
      { seq: 2, type: 'turn/start', time: 1, data: { turn: 2 } },
      { seq: 3, type: 'user/message', time: 1, data: { content: 'a question' } },
    ]
    await p.append('z', events)
    await p.close('z')
    const path = p.locate(meta('z')).path
    const bytes = await readFile(path)
    const starts = [0]
    for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) starts.push(i + 1)
    // Line 4 (seq 2) zeroed as a crash leaves it; line 5 (seq 3) complete with one byte changed.
    bytes.fill(0, starts[3]!, starts[4]! - 1)
    const q = bytes.indexOf('question', starts[4]!)
    bytes[q] = 'Q'.charCodeAt(0)
    await writeFile(path, bytes)
    const err = await createJsonlPersistence({ root }).load('z').catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'E_CORRUPT', line: 5 })
    expect((err as Error).message).toContain('checksum mismatch')
    expect((await readFile(path)).equals(bytes)).toBe(true)
  })
})

describe('a rewrite whose lock is lost while it writes', () => {
  test('migrate replaces nothing (E_LOCKED): the log another instance took over and appended to keeps its events, the temporary file is gone', async () => {
    const { createNodeFileSystem } = await import('../src/jsonl/fs/node-file-system.js')
    const { readdir, rm } = await import('node:fs/promises')
    const { dirname, join } = await import('node:path')
    const root = await tmpRoot()
    const old = createJsonlPersistence({ root, formatVersion: 0 })
    await old.create(meta('m'))
    await old.append('m', [{ seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } }, { seq: 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }])
    await old.close('m')
    const path = old.locate(meta('m')).path
    // The migration's temporary file: its sync waits until the test lets it go on.
    const base = createNodeFileSystem()
    let paused: (() => void) | undefined
    let pause: Promise<void> | undefined
    const fs = Object.assign(Object.create(base) as typeof base, {
      open: async (p: string, flags: Parameters<typeof base.open>[1], mode?: number) => {
        const h = await base.open(p, flags, mode)
        if (!p.split('/').at(-1)!.startsWith('.tmp')) return h
        const wait = async () => {
          pause = new Promise<void>((r) => (paused = r))
          await pause
        }
        return new Proxy(h, {
          get(target, prop) {
            if (prop === 'sync') return async () => (await wait(), target.sync())
            if (prop === 'datasync') return async () => (await wait(), target.datasync())
            const value = Reflect.get(target, prop, target) as unknown
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
          },
        })
      },
    })
    const migrating = createJsonlPersistence({ root, fs, staleLockMs: 1000 }).migrate('m').then(
      () => 'migrated',
      (e: { code?: string }) => e.code,
    )
    for (let i = 0; !paused && i < 1000; i++) await new Promise((r) => setTimeout(r, 5))
    expect(paused, await Promise.race([migrating, 'still migrating'])).toBeDefined() // the rig reached the pause
    // The lock taken from it (removed by hand), another instance appends meanwhile.
    await rm(join(root, '.locks', 'm.lock'))
    const other = createJsonlPersistence({ root, formatVersion: 0 })
    const loaded = await other.load('m')
    await other.append('m', [{ seq: loaded.events.length, type: 'note', time: 1 }])
    await other.close('m')
    await new Promise((r) => setTimeout(r, 700)) // past the migration's lease (staleLockMs / 2)
    paused!()
    expect(await migrating).toBe('E_LOCKED')
    const after = await createJsonlPersistence({ root }).inspect('m')
    expect(after.events.map((e) => e.seq)).toEqual([0, 1, 2])
    expect((await readdir(dirname(path))).filter((n) => n.startsWith('.tmp'))).toEqual([])
  })
})
