import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence, createNodeFileSystem, type FileSystem, type RawSessionStream } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { withRead } from './helpers/observed-fs.js'

// A JSONL raw stream reads its header when it is opened and its event lines when it is iterated,
// holding no descriptor in between (§15.5). A migrate, redact or repair renames a new file over
// the log meanwhile, a delete and create makes another: the pages must never be another file's
// lines under the header handed out (a version-0 header over version-1 lines, say).

const dirs: string[] = []
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })))
})
const newDir = async () => {
  const d = await mkdtemp(join(tmpdir(), 'raw-hunt-'))
  dirs.push(d)
  return d
}

const code = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? 'foreign error')

async function drain(stream: RawSessionStream): Promise<string[]> {
  const lines: string[] = []
  for await (const page of stream.eventPages) lines.push(...page)
  return lines
}

/** A version-0 log `m` of two turns, one holding a secret, in a fresh root. */
async function source(extra: { formatVersion?: 0 | 1 } = {}) {
  const root = await newDir()
  const v0 = createJsonlPersistence({ root, sync: 'none', formatVersion: extra.formatVersion ?? 0 })
  await v0.create(meta('m'))
  await v0.append('m', [...turn(0, 1), ...turn(4, 2)])
  await v0.append('m', [{ seq: 8, type: 'user/message', time: 1, data: { content: 'hunter2' } }])
  await v0.close('m')
  return { root, store: createJsonlPersistence({ root, sync: 'none' }) }
}

const rewrites = {
  migrate: (s: ReturnType<typeof createJsonlPersistence>) => s.migrate('m'),
  redact: (s: ReturnType<typeof createJsonlPersistence>) => s.redact('m', { pattern: 'hunter2' }),
}

describe('a JSONL raw stream reads its pages from the file its header came from', () => {
  for (const [name, rewrite] of Object.entries(rewrites)) {
    for (const wrapped of [false, true]) {
      test(`a ${name} between openRawStream and the import: E_NOT_FOUND, nothing imported (${wrapped ? "the caller's copy of the stream" : 'the stream itself'})`, async () => {
        const { store } = await source()
        const opened = await store.openRawStream('m')
        expect(opened.headerLine).toContain('"version":0')
        await rewrite(store)
        const target = createJsonlPersistence({ root: await newDir(), sync: 'none' })
        const stream = wrapped ? { id: opened.id, headerLine: opened.headerLine, eventPages: opened.eventPages } : opened
        const err = await target.importRawStream(stream).catch((e: { code: string; message: string }) => e)
        expect(err).toMatchObject({ code: 'E_NOT_FOUND' })
        expect((err as { message: string }).message).toMatch(/rewritten|deleted/)
        expect(await code(target.inspect('m'))).toBe('E_NOT_FOUND')
        expect(await target.list()).toEqual([])
        // The source is whole, and a stream opened now copies it as it is now.
        const now = await store.readRaw('m')
        expect(await target.importRawStream(await store.openRawStream('m'))).toEqual({ eventLines: now.eventLines.length })
        expect(await target.readRaw('m')).toEqual(now)
      })
    }
  }

  test('a rewrite between the open and the iteration: the pages reject E_NOT_FOUND before any line', async () => {
    const { store } = await source()
    const opened = await store.openRawStream('m', { pageLines: 2 })
    await store.migrate('m')
    const seen: string[] = []
    const err = await (async () => {
      for await (const page of opened.eventPages) seen.push(...page)
    })().catch((e: { code: string }) => e)
    expect(err).toMatchObject({ code: 'E_NOT_FOUND' })
    expect(seen).toEqual([])
  })

  test('a repair (truncate at damage) between the open and the import: E_NOT_FOUND', async () => {
    const { root, store } = await source({ formatVersion: 1 })
    // Damage in the middle: a line's checksum broken, so the repair cuts from there.
    const { readFile, writeFile } = await import('node:fs/promises')
    const bucket = (await readdir(root)).find((d) => !d.startsWith('.'))!
    const file = join(root, bucket, 'm.jsonl')
    const text = await readFile(file, 'utf8')
    await writeFile(file, text.replace('question 2', 'question Z'))
    const opened = await store.openRawStream('m')
    await store.truncateAtDamage('m')
    const target = createJsonlPersistence({ root: await newDir(), sync: 'none' })
    expect(await code(target.importRawStream(opened))).toBe('E_NOT_FOUND')
    expect(await target.list()).toEqual([])
  })

  test('appends in place between the open and the iteration are not a rewrite: the stream reads on', async () => {
    const { root, store } = await source({ formatVersion: 1 })
    const opened = await store.openRawStream('m')
    const writer = createJsonlPersistence({ root, sync: 'none' })
    await writer.load('m', { closeOpenTurn: false })
    await writer.append('m', turn(9, 3))
    await writer.close('m')
    expect(await drain(opened)).toEqual((await store.readRaw('m')).eventLines)
  })

  test('a stream never iterated holds no file: every file it opened is closed once it resolves', async () => {
    const { root } = await source()
    const base = createNodeFileSystem()
    let open = 0
    const fs: FileSystem = {
      ...base,
      supportsDsync: base.supportsDsync,
      async open(path, flags, mode) {
        const h = await base.open(path, flags, mode)
        open++
        const counted = withRead(h, (...a) => h.read(...a))
        return {
          ...counted,
          close: async () => {
            open--
            await h.close()
          },
        }
      },
    }
    const store = createJsonlPersistence({ root, sync: 'none', fs })
    const opened = await store.openRawStream('m')
    expect(open).toBe(0)
    // Iterated and abandoned after a page: its file is closed again.
    for await (const page of opened.eventPages) {
      expect(page.length).toBeGreaterThan(0)
      expect(open).toBe(1)
      break
    }
    expect(open).toBe(0)
  })
})
