import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { bucketName, createJsonlPersistence, createNodeFileSystem, encodeSessionId, type FileSystem, type ListProblem, type PeekedBatch } from '../src/index.js'
import { peekFilesInWorker, peekWorkersAlive } from '../src/jsonl/fs/peek-files.js'
import { PEEK_MIN_FILES } from '../src/jsonl/list-sessions.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { tapPaths } from './helpers/tap-paths.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A listing of many logs starts the seam's reading threads on the logs of its first buckets and
// hands them the paths of the others as it reads their directories (peekFiles given chunks).

async function collect(batches: AsyncIterable<PeekedBatch>) {
  const out: { start: number; files: { size: number; head?: string; headEnd?: string; error?: string }[] }[] = []
  for await (const b of batches) out.push({ start: b.start, files: b.files.map((f) => ({ size: f.size, head: f.head?.toString(), headEnd: f.headEnd, error: f.error?.code })) })
  return out
}

async function* chunksOf(paths: readonly string[], sizes: number[]): AsyncGenerator<readonly string[]> {
  let at = 0
  for (const size of sizes) {
    await new Promise((r) => setTimeout(r, 1)) // as a directory read takes its time
    yield paths.slice(at, at + size)
    at += size
  }
  if (at < paths.length) yield paths.slice(at)
}

const waitForNoWorker = async () => {
  for (let i = 0; i < 2000 && peekWorkersAlive() > 0; i++) await new Promise((r) => setTimeout(r, 5))
  return peekWorkersAlive()
}

test('peekFiles given the paths in chunks yields the batches it yields for the whole list, whatever the chunks', async () => {
  const dir = await tmpRoot()
  const paths = Array.from({ length: 3000 }, (_, i) => join(dir, i % 301 === 0 ? `missing-${i}` : `f-${i}`))
  await Promise.all(paths.map((p, i) => (i % 301 === 0 ? undefined : writeFile(p, `line ${i}\n${'x'.repeat(i % 7)}`))))
  const whole = await collect(peekFilesInWorker(paths, 64))
  expect(whole.map((b) => b.start)).toEqual(Array.from({ length: 6 }, (_, b) => b * 512))
  for (const sizes of [[1, 0, 511, 513, 1000, 0, 3000], [0, 0, 100], Array.from({ length: 30 }, () => 100)]) {
    // expectedFiles sizes the threads (two for 9,000): the batches are the same with one or two
    for (const expectedFiles of [undefined, 9000]) {
      expect(await collect(peekFilesInWorker(chunksOf(paths, sizes), 64, expectedFiles === undefined ? {} : { expectedFiles }))).toEqual(whole)
    }
  }
  expect(await collect(peekFilesInWorker(chunksOf([], [0, 0]), 64))).toEqual([])
  expect(await waitForNoWorker()).toBe(0)
}, 60_000)

test('peekFiles: chunks that fail end the iteration with their error; an iteration ended early ends the workers', async () => {
  const dir = await tmpRoot()
  const paths = Array.from({ length: 3000 }, (_, i) => join(dir, `missing-${i}`))
  async function* failing() {
    yield paths.slice(0, 1500)
    await new Promise((r) => setTimeout(r, 20))
    throw new Error('the directory went away')
  }
  let seen = 0
  const ended = await (async () => {
    for await (const b of peekFilesInWorker(failing(), 0, { expectedFiles: 10_000 })) seen += b.files.length
  })().then(
    () => 'ended',
    (err: Error) => err.message,
  )
  expect(ended).toBe('the directory went away')
  expect(seen).toBeLessThanOrEqual(1500)
  expect(await waitForNoWorker()).toBe(0)

  // Chunks that never end: the consumer's break ends the workers (one waits for its next batch).
  let more: () => void = () => undefined
  async function* endless() {
    yield paths.slice(0, 700)
    await new Promise<void>((r) => (more = r))
  }
  for await (const b of peekFilesInWorker(endless(), 64, { expectedFiles: 10_000 })) {
    expect([b.start, b.files.length, b.files[0]!.error?.code]).toEqual([0, 512, 'ENOENT'])
    break
  }
  more()
  expect(await waitForNoWorker()).toBe(0)
})

/** A root whose first bucket alone holds more than PEEK_MIN_FILES logs, then two more buckets with logs and bad entries. */
async function spreadRoot(): Promise<{ root: string; logs: number }> {
  const root = await tmpRoot()
  const buckets = [bucketName(undefined), bucketName('/a'), bucketName('/b')].map((b) => join(root, b))
  expect(buckets.map((b) => b.slice(root.length + 1)).sort()[0]).toBe(bucketName(undefined)) // read first (listing)
  for (const b of buckets) await mkdir(b)
  const counts = [PEEK_MIN_FILES + 300, 900, 40]
  const writes: Promise<void>[] = []
  let i = 0
  counts.forEach((count, k) => {
    for (let j = 0; j < count; j++, i++) {
      const id = `s${i}`
      writes.push(writeFile(join(buckets[k]!, `${encodeSessionId(id)}.jsonl`), `${headerLine(meta(id, { createdAt: 1_700_000_000_000 + ((i * 7919) % 5000) }), i % 2 ? 1 : 0)}{"seq":0,"type":"x","time":1}\n`))
    }
  })
  await Promise.all(writes)
  // Bad entries in the buckets read after the threads started.
  for (const b of buckets.slice(1)) {
    await writeFile(join(b, `${encodeSessionId(`bad-crc-${b.length}`)}.jsonl`), headerLine(meta('x'), 1).replace(/"crc":"[0-9a-f]{8}"/, '"crc":"00000000"'))
    await writeFile(join(b, 'not%encoded!.jsonl'), headerLine(meta('x')))
    await mkdir(join(b, `${encodeSessionId('a-directory')}.jsonl`))
    await writeFile(join(b, `${encodeSessionId('wrong-id')}.jsonl`), headerLine(meta('someone-else')))
  }
  return { root, logs: counts.reduce((a, b) => a + b, 0) }
}

async function listing(root: string, seam: FileSystem, opts: { orderBy?: 'lastWrite'; limit?: number } = {}) {
  const problems: ListProblem[] = []
  const warnings: string[] = []
  // The root's entries by name, so that the big bucket (`_no-cwd`) is read first whatever order
  // the file system gives.
  const fs: FileSystem = { ...seam, readdir: async (path) => (await seam.readdir(path)).sort((a, b) => (path === root && a.name < b.name ? -1 : path === root && a.name > b.name ? 1 : 0)) }
  if (seam.peekFiles) Object.assign(fs, { peekFiles: seam.peekFiles, peekChunks: seam.peekChunks })
  const listed = await createJsonlPersistence({ root, fs, logger: { warn: (m) => warnings.push(m) } }).list({ ...opts, onProblem: (p) => problems.push(p) })
  return { listed, problems: problems.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.message < b.message ? -1 : 1)), warnings }
}

test('a listing whose first bucket holds enough logs hands the rest to the reading threads as it finds them: the same listing as log by log', async () => {
  const { root, logs } = await spreadRoot()
  const node = createNodeFileSystem()
  const calls: { chunks: number[]; inChunks: boolean; headBytes: number; expectedFiles: number | undefined }[] = []
  const fs: FileSystem = {
    ...node,
    peekChunks: true,
    peekFiles: (paths, headBytes, options) => {
      const call = { chunks: [] as number[], inChunks: false, headBytes, expectedFiles: options?.expectedFiles }
      calls.push(call)
      return node.peekFiles!(
        tapPaths(paths, (chunk, inChunks) => {
          call.chunks.push(chunk.length)
          call.inChunks = inChunks
        }),
        headBytes,
        options,
      )
    },
  }
  const slowFs = { ...node, peekFiles: undefined }
  const fast = await listing(root, fs)
  const slow = await listing(root, slowFs)
  // The first bucket's logs, then each other bucket's log names (bad ones and the directory too).
  expect(calls).toEqual([{ chunks: [PEEK_MIN_FILES + 300, 903, 43], inChunks: true, headBytes: 4096, expectedFiles: 3 * (PEEK_MIN_FILES + 300) }])
  expect(fast.listed).toHaveLength(logs)
  expect(fast).toEqual(slow)
  expect(fast.problems.map((p) => p.code).sort()).toEqual(['E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_CORRUPT', 'E_IO', 'E_IO'])

  calls.length = 0
  const picker = await listing(root, fs, { orderBy: 'lastWrite', limit: 25 })
  expect(calls.map((c) => [c.chunks, c.inChunks, c.headBytes])).toEqual([[[PEEK_MIN_FILES + 300, 903, 43], true, 0]])
  expect(picker).toEqual(await listing(root, slowFs, { orderBy: 'lastWrite', limit: 25 }))
  expect(picker.listed).toHaveLength(25)
  expect(await waitForNoWorker()).toBe(0)
}, 60_000)

test('a peekFiles that fails while the other buckets are still read leaves every log not handed over to the log-by-log path', async () => {
  const { root, logs } = await spreadRoot()
  const node = createNodeFileSystem()
  const failing: FileSystem = {
    ...node,
    peekChunks: true,
    peekFiles: async function* (paths, headBytes, options) {
      for await (const batch of node.peekFiles!(paths, headBytes, options)) {
        yield batch
        throw new Error('the worker died')
      }
    },
  }
  const slowFs = { ...node, peekFiles: undefined }
  const broken = await listing(root, failing)
  const slow = await listing(root, slowFs)
  expect(broken.listed).toHaveLength(logs)
  expect({ ...broken, warnings: [] }).toEqual(slow)
  // Every log name of the three buckets but the first batch's 512, found after the failure or not.
  expect(broken.warnings).toEqual([`listing ${logs + 2 * 3 - 512} logs one by one: the worker died`])
  const picker = await listing(root, failing, { orderBy: 'lastWrite', limit: 5 })
  expect(picker.listed).toEqual((await listing(root, slowFs, { orderBy: 'lastWrite', limit: 5 })).listed)
  expect(await waitForNoWorker()).toBe(0)
}, 60_000)

test('a seam whose peekFiles takes a list only (no peekChunks) is given every log in one list; one that ends early leaves the rest to the log-by-log path', async () => {
  const { root, logs } = await spreadRoot()
  const node = createNodeFileSystem()
  expect([node.peekChunks, { ...node }.peekChunks]).toEqual([true, undefined]) // not carried by a spread, as peekFiles
  const lists: number[] = []
  // A host's seam written for a list: `paths.length` and indexes, as before chunks existed.
  const listOnly: FileSystem = {
    ...node,
    peekFiles: (paths, headBytes, options) => {
      const list = paths as readonly string[]
      lists.push(list.length)
      return node.peekFiles!(list.slice(), headBytes, options)
    },
  }
  const slow = await listing(root, { ...node, peekFiles: undefined })
  expect(await listing(root, listOnly)).toEqual(slow)
  expect(lists).toEqual([logs + 6])
  // A seam that stops after its first batch without an error: no log is left out.
  const short: FileSystem = {
    ...node,
    peekChunks: true,
    peekFiles: async function* (paths, headBytes, options) {
      for await (const batch of node.peekFiles!(paths, headBytes, options)) {
        yield batch
        return
      }
    },
  }
  const cut = await listing(root, short)
  expect({ ...cut, warnings: [] }).toEqual(slow)
  expect(cut.warnings).toEqual([`listing ${logs + 6 - 512} logs one by one: peekFiles ended after 512 of ${logs + 6} logs`])
  expect(await waitForNoWorker()).toBe(0)
}, 60_000)

test('a listing that fails (its onProblem throws) reads no more buckets and reports nothing after it rejected', async () => {
  const root = await tmpRoot()
  const writes: Promise<void>[] = []
  let i = 0
  for (let b = 0; b < 40; b++) {
    const dir = join(root, `b${String(b).padStart(2, '0')}`)
    await mkdir(dir)
    for (let j = 0; j < 60; j++, i++) {
      const id = `s${i}`
      writes.push(writeFile(join(dir, `${encodeSessionId(id)}.jsonl`), b === 0 && j === 0 ? 'not a header\n' : headerLine(meta(id), 1)))
    }
    writes.push(writeFile(join(dir, 'not%encoded!.jsonl'), 'x\n'))
  }
  await Promise.all(writes)
  const node = createNodeFileSystem()
  // Each bucket's directory read takes a little while, so the header problem comes before the last buckets are read.
  const fs: FileSystem = {
    ...node,
    peekChunks: true,
    readdir: async (path) => {
      const entries = await node.readdir(path)
      if (path !== root) await new Promise((r) => setTimeout(r, 5))
      return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    },
  }
  Object.assign(fs, { peekFiles: node.peekFiles })
  let rejected = false
  let after = 0
  const outcome = await createJsonlPersistence({ root, fs })
    .list({
      onProblem: (p) => {
        if (rejected) after++
        if (p.code === 'E_CORRUPT' && !p.path.includes('not%')) throw new Error('the host gives up')
      },
    })
    .then(
      (l) => `listed ${l.length}`,
      (err: Error) => err.message,
    )
  rejected = true
  await new Promise((r) => setTimeout(r, 400))
  expect([outcome, after]).toEqual([expect.stringMatching(/the host gives up$/), 0])
  expect(await waitForNoWorker()).toBe(0)
}, 60_000)
