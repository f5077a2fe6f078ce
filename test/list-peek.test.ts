import { mkdir, open, stat, writeFile } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import {
  bucketName,
  createJsonlPersistence,
  createNodeFileSystem,
  encodeSessionId,
  type FileSystem,
  type ListProblem,
  type PeekedBatch,
  type SessionListing,
} from '../src/index.js'
import { PEEK_MIN_FILES } from '../src/jsonl/list-sessions.js'
import { peekFilesInWorker, peekWorkerCount, peekWorkersAlive, WORKER_SOURCE } from '../src/jsonl/fs/peek-files.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { tapPaths } from './helpers/tap-paths.js'

/** What the asynchronous API rejects with for `path` (open, then read). */
async function asyncFailure(path: string): Promise<{ code: unknown; message: string }> {
  try {
    const h = await open(path, 'r')
    try {
      await h.read(Buffer.alloc(16), 0, 16, 0)
    } finally {
      await h.close()
    }
  } catch (err) {
    return { code: (err as NodeJS.ErrnoException).code, message: (err as Error).message }
  }
  throw new Error(`${path} did not fail`)
}

async function collect(batches: AsyncIterable<PeekedBatch>) {
  const out: PeekedBatch[] = []
  // The buffers are only valid until the next batch: copy the heads.
  for await (const b of batches) out.push({ start: b.start, files: b.files.map((f) => ({ ...f, head: f.head && Buffer.from(f.head) })) })
  return out
}

test('peekFiles of the Node seam: each first line, its end, size and mtime as stat gives them, and the errors the async calls give', async () => {
  const dir = await tmpRoot()
  const long = `{"x":"${'a'.repeat(5000)}"}\n`
  const files: Record<string, string | null> = {
    line: '{"a":1}\nsecond line\n',
    eof: '{"a":1',
    empty: '',
    long,
    exact: `${'b'.repeat(4095)}\n`,
  }
  for (const [name, text] of Object.entries(files)) if (text !== null) await writeFile(join(dir, name), text)
  await mkdir(join(dir, 'adir'))
  const paths = [...Object.keys(files), 'adir', 'missing'].map((n) => join(dir, n))
  const [batch, ...more] = await collect(peekFilesInWorker(paths, 4096))
  expect(more).toEqual([])
  expect(batch!.start).toBe(0)
  const byName = Object.fromEntries(batch!.files.map((f, i) => [paths[i]!.slice(dir.length + 1), f]))
  expect(byName.line!.head!.toString()).toBe('{"a":1}')
  expect(byName.line!.headEnd).toBe('line')
  expect(byName.eof!.head!.toString()).toBe('{"a":1')
  expect(byName.eof!.headEnd).toBe('eof')
  expect(byName.empty!.head!.length).toBe(0)
  expect(byName.empty!.headEnd).toBe('eof')
  expect(byName.long!.head!.length).toBe(4096)
  expect(byName.long!.headEnd).toBe('more')
  expect(byName.exact!.head!.toString()).toBe('b'.repeat(4095))
  expect(byName.exact!.headEnd).toBe('line')
  for (const name of Object.keys(files)) {
    const st = await stat(join(dir, name))
    expect([byName[name]!.size, byName[name]!.mtimeMs, byName[name]!.error]).toEqual([st.size, st.mtimeMs, undefined])
  }
  for (const name of ['adir', 'missing']) {
    const expected = await asyncFailure(join(dir, name))
    expect({ code: byName[name]!.error?.code, message: byName[name]!.error?.message }).toEqual(expected)
  }
  expect(byName.adir!.error!.code).toBe('EISDIR')
  expect(byName.missing!.error!.code).toBe('ENOENT')

  // headBytes 0: a stat of each path, nothing read
  const [stats] = await collect(peekFilesInWorker(paths, 0))
  expect(stats!.files[0]).toEqual({ size: files.line!.length, mtimeMs: (await stat(paths[0]!)).mtimeMs })
  expect(stats!.files[5]!.error).toBeUndefined() // a directory stats fine
  expect(stats!.files[6]!.error?.code).toBe('ENOENT')
})

test('peekFiles hands over the files in order, in batches', async () => {
  const dir = await tmpRoot()
  const paths: string[] = []
  for (let i = 0; i < 1300; i++) {
    paths.push(join(dir, `f${i}`))
    await writeFile(paths[i]!, `line ${i}\n`)
  }
  const batches = await collect(peekFilesInWorker(paths, 64))
  expect(batches.map((b) => [b.start, b.files.length])).toEqual([
    [0, 512],
    [512, 512],
    [1024, 276],
  ])
  expect(batches.flatMap((b) => b.files.map((f) => f.head!.toString()))).toEqual(paths.map((_, i) => `line ${i}`))
  expect(await collect(peekFilesInWorker([], 64))).toEqual([])
})

test('a peekFiles iteration ended early terminates its worker, even one waiting for the consumer', async () => {
  const dir = await tmpRoot()
  // 8 batches: the worker gets at most 5 ahead, then waits (Atomics.wait) for the consumer.
  const paths = Array.from({ length: 4096 }, (_, i) => join(dir, `missing-${i}`))
  expect(peekWorkersAlive()).toBe(0)
  let seen = 0
  for await (const b of peekFilesInWorker(paths, 64)) {
    seen += b.files.length
    expect(b.files.every((f) => f.error?.code === 'ENOENT')).toBe(true)
    expect(peekWorkersAlive()).toBe(1)
    await new Promise((r) => setTimeout(r, 50)) // the worker runs ahead and blocks meanwhile
    break
  }
  expect(seen).toBe(512)
  expect(peekWorkersAlive()).toBe(0)
  // Read to the end, it exits by itself.
  expect((await collect(peekFilesInWorker(paths, 0))).length).toBe(8)
  for (let i = 0; i < 2000 && peekWorkersAlive() > 0; i++) await new Promise((r) => setTimeout(r, 5)) // a worker's exit takes longer on a loaded machine
  expect(peekWorkersAlive()).toBe(0)
})

test('with many files several workers share the batches, which are still handed over in order; ending early terminates them all', async () => {
  const most = Math.min(4, Math.max(2, availableParallelism()))
  expect([2047, 4096, 8191, 8192, 16_384, 100_000].map((n) => peekWorkerCount(n))).toEqual([1, 1, 1, 2, Math.min(4, most), most])
  expect([4096, 8192, 100_000].map((n) => peekWorkerCount(n, 0))).toEqual([1, 2, 2])
  const dir = await tmpRoot()
  // Mostly missing files (fast, an ENOENT each), a real one every 997 files at a known place.
  const paths = Array.from({ length: 16_384 + 300 }, (_, i) => join(dir, i % 997 === 0 ? `real-${i}` : `missing-${i}`))
  for (let i = 0; i < paths.length; i += 997) await writeFile(paths[i]!, `line ${i}\n`)
  const batches = await collect(peekFilesInWorker(paths, 64))
  expect(batches.map((b) => b.start)).toEqual(Array.from({ length: 33 }, (_, b) => b * 512))
  const files = batches.flatMap((b) => b.files)
  expect(files).toHaveLength(paths.length)
  files.forEach((f, i) => {
    if (i % 997 === 0) expect([i, f.head?.toString(), f.headEnd]).toEqual([i, `line ${i}`, 'line'])
    else expect([i, f.error?.code]).toEqual([i, 'ENOENT'])
  })
  for (let i = 0; i < 2000 && peekWorkersAlive() > 0; i++) await new Promise((r) => setTimeout(r, 5)) // a worker's exit takes longer on a loaded machine
  expect(peekWorkersAlive()).toBe(0)
  for await (const b of peekFilesInWorker(paths, 0)) {
    expect(b.start).toBe(0)
    await new Promise((r) => setTimeout(r, 50)) // the workers run ahead, then wait
    break
  }
  expect(peekWorkersAlive()).toBe(0)
})

test('a seam made by spreading the Node seam lists through its own open, not the worker', async () => {
  const root = await fixture(PEEK_MIN_FILES + 10)
  const opened: string[] = []
  const node = createNodeFileSystem()
  const spread: FileSystem = {
    ...node,
    open: (path, flags, mode) => {
      opened.push(path)
      return node.open(path, flags, mode)
    },
  }
  expect(spread.peekFiles).toBeUndefined()
  // A seam derived from it by prototype may still replace it (it is writable).
  const derived = Object.create(node) as FileSystem & { peekFiles?: unknown }
  derived.peekFiles = undefined
  expect(derived.peekFiles).toBeUndefined()
  expect(typeof node.peekFiles).toBe('function')
  const { listed } = await listing(root, spread)
  expect(listed).toHaveLength(PEEK_MIN_FILES + 11)
  expect(opened.filter((p) => p.endsWith('.jsonl'))).toHaveLength(PEEK_MIN_FILES + 10 + 7) // every log, the bad ones and the directory
})

/** A root of `n` good logs in three buckets, and every kind of bad file a listing reports or skips. */
async function fixture(n: number): Promise<string> {
  const root = await tmpRoot()
  const buckets = [bucketName(undefined), bucketName('/a'), bucketName('/b')].map((b) => join(root, b))
  for (const b of buckets) await mkdir(b)
  const writes: Promise<void>[] = []
  for (let i = 0; i < n; i++) {
    const id = `s${i}`
    const path = join(buckets[i % 3]!, `${encodeSessionId(id)}.jsonl`)
    writes.push(writeFile(path, `${headerLine(meta(id, { createdAt: 1_700_000_000_000 + ((i * 7919) % n) }), i % 2 ? 1 : 0)}{"seq":0,"type":"x","time":1}\n`))
  }
  await Promise.all(writes)
  const b = buckets[0]!
  const put = (id: string, text: string) => writeFile(join(b, `${encodeSessionId(id)}.jsonl`), text)
  await put('bad-json', 'not a header\n')
  await put('empty', '')
  await put('no-newline', headerLine(meta('no-newline')).trimEnd())
  await put('wrong-id', headerLine(meta('someone-else')))
  await put('big-header', headerLine(meta('big-header', { notes: 'n'.repeat(10_000) }), 1)) // longer than one block: listed
  await put('bad-crc', headerLine(meta('bad-crc'), 1).replace(/"crc":"[0-9a-f]{8}"/, '"crc":"00000000"'))
  await writeFile(join(b, 'not%encoded!.jsonl'), headerLine(meta('x')))
  await writeFile(join(b, `.${encodeSessionId('tmp')}.jsonl`), headerLine(meta('tmp')))
  await mkdir(join(b, `${encodeSessionId('a-directory')}.jsonl`))
  return root
}

const withoutPeek = (): FileSystem => ({ ...createNodeFileSystem(), peekFiles: undefined })

async function listing(root: string, fs: FileSystem, opts: { orderBy?: 'lastWrite'; limit?: number } = {}) {
  const problems: ListProblem[] = []
  const warnings: string[] = []
  const listed: SessionListing[] = await createJsonlPersistence({ root, fs, logger: { warn: (m) => warnings.push(m) } }).list({
    ...opts,
    onProblem: (p) => problems.push(p),
  })
  return { listed, problems: problems.sort((a, b) => (a.path < b.path ? -1 : 1)), warnings }
}

test('a listing of many logs through peekFiles equals the one made log by log: the same listings, order and problems', async () => {
  const n = PEEK_MIN_FILES + 100
  const root = await fixture(n)
  const peeked: number[] = []
  const node = createNodeFileSystem()
  const counting: FileSystem = {
    ...node,
    peekFiles: (paths, headBytes) => {
      const call = peeked.push(0, headBytes) - 2
      return node.peekFiles!(
        tapPaths(paths, (chunk) => (peeked[call] = peeked[call]! + chunk.length)),
        headBytes,
      )
    },
  }
  const fast = await listing(root, counting)
  const slow = await listing(root, withoutPeek())
  expect(peeked).toEqual([n + 7, 4096]) // every log name (the bad ones and the directory too), not the unencoded or hidden ones
  expect(fast.listed).toHaveLength(n + 1) // the big header is listed
  expect(fast.listed.some((l) => l.meta.id === 'big-header')).toBe(true)
  expect(fast).toEqual(slow)
  expect(fast.problems.map((p) => p.code).sort()).toEqual(['E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_IO'])
  expect(fast.problems.find((p) => p.code === 'E_IO')!.message).toMatch(/^EISDIR/)

  peeked.length = 0
  const fastPicker = await listing(root, counting, { orderBy: 'lastWrite', limit: 20 })
  const slowPicker = await listing(root, withoutPeek(), { orderBy: 'lastWrite', limit: 20 })
  expect(peeked).toEqual([n + 7, 0])
  expect(fastPicker.listed).toHaveLength(20)
  expect(fastPicker).toEqual(slowPicker)
}, 60_000)

test('below PEEK_MIN_FILES logs a listing goes log by log; a peekFiles that fails midway leaves the rest to that path', async () => {
  const small = await fixture(50)
  let calls = 0
  const node = createNodeFileSystem()
  const counting: FileSystem = { ...node, peekFiles: (p, h) => (calls++, node.peekFiles!(p, h)) }
  expect((await listing(small, counting)).listed).toHaveLength(51)
  expect(calls).toBe(0)

  const root = await fixture(PEEK_MIN_FILES + 700)
  const failing: FileSystem = {
    ...node,
    peekFiles: async function* (paths, headBytes) {
      for await (const batch of node.peekFiles!(paths, headBytes)) {
        yield batch
        throw new Error('the worker died')
      }
    },
  }
  const broken = await listing(root, failing)
  const plain = await listing(root, withoutPeek())
  expect(broken.listed).toEqual(plain.listed)
  expect(broken.problems).toEqual(plain.problems)
  expect(broken.warnings).toEqual([`listing ${PEEK_MIN_FILES + 700 + 7 - 512} logs one by one: the worker died`])
  const brokenPicker = await listing(root, failing, { orderBy: 'lastWrite', limit: 5 })
  expect(brokenPicker.listed).toEqual((await listing(root, withoutPeek(), { orderBy: 'lastWrite', limit: 5 })).listed)
}, 60_000)

test("the worker's program: a file whose close fails is an error, and the files after it keep their own heads", () => {
  const files: Record<string, string> = { a: 'AAAA\nrest', b: 'BBBB\n', c: 'CCCC\n' }
  const open = new Map<number, string>()
  const fakeFs = {
    openSync: (p: string) => (open.set(open.size + 3, p), open.size + 2),
    readSync: (fd: number, buf: Buffer, off: number, len: number) => Buffer.from(files[open.get(fd)!]!).copy(buf, off, 0, len),
    fstatSync: (fd: number) => ({ size: files[open.get(fd)!]!.length, mtimeMs: 7 }),
    closeSync: (fd: number) => {
      if (open.get(fd) === 'a') throw Object.assign(new Error('EIO: i/o error, close'), { code: 'EIO', syscall: 'close' })
    },
  }
  const posted: { lens: Int32Array; heads: Uint8Array; errors: unknown[][] }[] = []
  const consumed = new Int32Array(new SharedArrayBuffer(4))
  // The batches as the port hands them over: one of three files, then the end.
  const port = { messages: [{ start: 0, paths: ['a', 'b', 'c'] }, { end: true }] }
  const fakeRequire = (m: string) =>
    m === 'node:fs'
      ? fakeFs
      : {
          parentPort: { postMessage: (msg: (typeof posted)[number]) => posted.push(msg) },
          receiveMessageOnPort: (p: typeof port) => (p.messages.length > 0 ? { message: p.messages.shift() } : undefined),
          workerData: { headBytes: 64, batchFiles: 512, window: 4, consumed, port, posted: new Int32Array(new SharedArrayBuffer(4)) },
        }
  new Function('require', WORKER_SOURCE)(fakeRequire)
  const [m] = posted
  expect(m!.errors.map((e) => [e[0], e[1], e[2]])).toEqual([[0, 'EIO', 'EIO: i/o error, close']])
  expect([...m!.lens]).toEqual([-1, 4, 4])
  expect(Buffer.from(m!.heads).toString()).toBe('BBBBCCCC')
})
