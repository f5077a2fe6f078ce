import { availableParallelism } from 'node:os'
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads'
import type { PeekedFile, PeekedBatch, PeekOptions } from './file-system.js'

/** Files a worker looks at before it hands them over (one message each batch). */
const BATCH_FILES = 512
/**
 * Batches the workers may be ahead of the consumer: what is queued is a few hundred KiB of first
 * lines (at most WINDOW + workers batches of BATCH_FILES × headBytes: 10 MiB for 4 KiB heads and
 * one worker, 16 MiB for four).
 */
const WINDOW = 4
/**
 * The workers of one call: one per FILES_PER_WORKER files, at most MAX_WORKERS (one a core, at
 * least two, at most four). On a cold cache each keeps one read in flight, and a listing of
 * 100,000 logs after the caches were dropped took 7.0 s with one worker, about twice the 3.7 s
 * of 32 asynchronous calls at a time (four reads in flight through the thread pool); raw reads
 * of their heads took 7.2 s on one thread, 4.6 on two, 3.8 on four. On a warm cache more
 * workers than cores only compete with the thread that parses what they read. A worker's start
 * costs about 20 ms.
 */
const MAX_WORKERS = Math.min(4, Math.max(2, availableParallelism()))
const FILES_PER_WORKER = 4096

/**
 * A `stat` of each file (no head) gains from a second worker on a warm cache (100,000 logs: 290
 * → 180 ms) but not from more, nor on a cold one (1.2 s on one, 1.3 on two, 1.65 on four).
 */
const MAX_STAT_WORKERS = 2

/** How many workers `peekFilesInWorker` starts for `files` files (`headBytes` 0: a `stat` each). */
export function peekWorkerCount(files: number, headBytes = 1): number {
  return Math.max(1, Math.min(headBytes === 0 ? MAX_STAT_WORKERS : MAX_WORKERS, Math.floor(files / FILES_PER_WORKER)))
}

/** What the worker posts for one batch: numbers in typed arrays, the kept bytes in one buffer. */
interface BatchMessage {
  start: number
  sizes: Float64Array
  mtimes: Float64Array
  /** Kept bytes of each file's head (see `peekWorker`), -1 for a file that failed. */
  lens: Int32Array
  /** 1: the kept bytes are a whole first line (its `\n` dropped); 0: the file ended before any `\n`; 2: no `\n` in `headBytes`. */
  ends: Int8Array
  heads: Uint8Array
  /** With a `join`: what it copied, as `[a,b,…]`, and 1 for each file it took (absent: it could not run). */
  joined?: Uint8Array
  taken?: Uint8Array
  joinedCount?: number
  errors: [index: number, code: string | undefined, message: string, syscall: string | undefined, errno: number | undefined][]
}

/**
 * A worker's whole program, run from its source text (`eval`), so that it needs no file of
 * its own next to the compiled one. It uses only `node:fs` synchronously: on its own thread a
 * synchronous call blocks nobody, and costs a few microseconds where the asynchronous API costs
 * a thread-pool round trip and a callback on the event loop (a listing of 100,000 logs spent
 * most of its time there, docs/decisions.md). With `stride` workers, it takes batches `first`,
 * `first + stride`, … of the whole list (`paths` holds only its own, `starts` where each begins
 * in the whole list). Before each batch it waits until the consumer, who takes the batches in
 * order, is at most `window` batches behind, so memory stays bounded whatever the number of files.
 */
function peekWorker(): void {
  const threads = require('node:worker_threads') as typeof import('node:worker_threads')
  const { parentPort, workerData } = threads
  const fs = require('node:fs') as typeof import('node:fs')
  const { headBytes, batchFiles, window, consumed } = workerData as {
    headBytes: number
    batchFiles: number
    window: number
    consumed: Int32Array
  }
  // The caller's `join` (PeekOptions), defined by WORKER_SOURCE's prelude from its source text;
  // unused without `crc32` (a Node without zlib.crc32) or `isUtf8`.
  const crc32 = (require('node:zlib') as { crc32?: (data: Uint8Array) => number }).crc32
  const isUtf8 = (require('node:buffer') as { isUtf8?: (data: Uint8Array) => boolean }).isUtf8
  const join: NonNullable<PeekOptions['join']> | undefined =
    workerData.join && crc32 !== undefined && isUtf8 !== undefined ? (globalThis as unknown as { peekJoin: NonNullable<PeekOptions['join']> }).peekJoin : undefined
  const stride: number = workerData.stride ?? 1
  // This worker's batches, in order, one message each on `port` as the caller finds the paths
  // (`{ start, paths }`: the paths from `start` on in the whole list); `posted` counts the
  // messages sent, so that the worker sleeps until one is there; `{ end: true }` ends them.
  const port = workerData.port as import('node:worker_threads').MessagePort
  const posted = workerData.posted as Int32Array
  const nextBatch = (): { start: number; list: string[] } | undefined => {
    for (;;) {
      const seen = Atomics.load(posted, 0)
      const got = threads.receiveMessageOnPort(port)
      if (got) {
        const m = got.message as { start: number; paths: string[] } | { end: true }
        return 'end' in m ? undefined : { start: m.start, list: m.paths }
      }
      Atomics.wait(posted, 0, seen)
    }
  }
  const scratch = Buffer.allocUnsafe(Math.max(headBytes, 1))
  // A batch's heads and joined lines are gathered here, then copied out at their size (the
  // copies are transferred): one allocation a worker, not two of about 2 MiB a batch.
  const kept = Buffer.allocUnsafe(headBytes > 0 ? batchFiles * headBytes : 0)
  // `[` + each taken line + `,` or `]`: at most one byte more than the head a line.
  const joined = join ? Buffer.allocUnsafe(batchFiles * (headBytes + 1) + 2) : undefined
  // As the seam's reads (node-file-system.ts): an open of a FIFO must not wait for a writer (it
  // would hold the worker, and the listing, for good), and a FIFO, socket or device is never read
  // (a directory fails its read, EISDIR, as with the asynchronous calls).
  const O_NONBLOCK = fs.constants?.O_NONBLOCK
  const READ_FLAGS = O_NONBLOCK === undefined ? 'r' : fs.constants.O_RDONLY | O_NONBLOCK
  // The file types (S_IFMT of `mode`) refused: FIFO, character device, block device, socket.
  const SPECIAL: Record<number, string> = { 0o010000: 'a FIFO', 0o020000: 'a character device', 0o060000: 'a block device', 0o140000: 'a socket' }
  const refuseSpecial = (path: string, st: import('node:fs').Stats) => {
    const kind = SPECIAL[st.mode & 0o170000]
    if (kind !== undefined) throw new Error(`${path} is not a regular file (${kind})`)
  }
  for (let batch = nextBatch(); batch !== undefined; batch = nextBatch()) {
    const { start, list } = batch
    // Back-pressure: sleep while this batch would be more than `window` ahead of the consumer.
    const index = start / batchFiles
    for (let seen = Atomics.load(consumed, 0); index - seen >= window + stride; seen = Atomics.load(consumed, 0)) {
      Atomics.wait(consumed, 0, seen)
    }
    const n = list.length
    const sizes = new Float64Array(n)
    const mtimes = new Float64Array(n)
    const lens = new Int32Array(n)
    const ends = new Int8Array(n)
    let used = 0
    const taken = join ? new Uint8Array(n) : undefined
    let joinedAt = 1
    let joinedCount = 0
    let joinFailure: unknown
    if (joined) joined[0] = 0x5b
    const errors: BatchMessage['errors'] = []
    for (let i = 0; i < n; i++) {
      const path = list[i]!
      try {
        if (headBytes === 0) {
          const st = fs.statSync(path)
          refuseSpecial(path, st)
          sizes[i] = st.size
          mtimes[i] = st.mtimeMs
          continue
        }
        const fd = fs.openSync(path, READ_FLAGS)
        let got: number
        let st: import('node:fs').Stats
        try {
          st = fs.fstatSync(fd)
          refuseSpecial(path, st)
          got = fs.readSync(fd, scratch, 0, headBytes, 0)
        } finally {
          fs.closeSync(fd)
        }
        // Kept only once the file is closed: a close that fails makes the file an error, and
        // the heads of the files after it stay where they belong.
        sizes[i] = st.size
        mtimes[i] = st.mtimeMs
        const nl = scratch.subarray(0, got).indexOf(10)
        const keep = nl >= 0 ? nl : got
        if (joined && nl >= 0) {
          let after: number
          try {
            after = join!(scratch, nl, joined, joinedAt, crc32!, isUtf8!)
          } catch (err) {
            // Not this file's failure: the worker ends, and the listing does the rest log by log.
            joinFailure = err
            throw err
          }
          if (after >= 0) {
            joined[after] = 0x2c
            joinedAt = after + 1
            joinedCount++
            taken![i] = 1
            lens[i] = 0
            ends[i] = 1
            continue
          }
        }
        scratch.copy(kept, used, 0, keep)
        used += keep
        lens[i] = keep
        ends[i] = nl >= 0 ? 1 : got < headBytes ? 0 : 2
      } catch (err) {
        if (joinFailure !== undefined) throw joinFailure
        const e = err as NodeJS.ErrnoException
        lens[i] = -1
        errors.push([i, e.code, e.message, e.syscall, e.errno])
      }
    }
    const heads = new Uint8Array(used)
    heads.set(kept.subarray(0, used))
    const message: BatchMessage = { start, sizes, mtimes, lens, ends, heads, errors }
    const transfer = [sizes.buffer, mtimes.buffer, lens.buffer, ends.buffer, heads.buffer]
    if (joined) {
      // `]` in place of the last `,` (after the `[` of an empty array).
      if (joinedCount === 0) {
        joined[1] = 0x5d
        joinedAt = 2
      } else joined[joinedAt - 1] = 0x5d
      const bytes = new Uint8Array(joinedAt)
      bytes.set(joined.subarray(0, joinedAt))
      message.joined = bytes
      message.taken = taken
      message.joinedCount = joinedCount
      transfer.push(bytes.buffer, taken!.buffer)
    }
    parentPort!.postMessage(message, transfer)
  }
}

let alive = 0
/** Workers of `peekFilesInWorker` that have not exited yet (none once every iteration has ended). */
export function peekWorkersAlive(): number {
  return alive
}

/** The worker's source: `peekWorker` called on its own (exported for a test that runs it with a stub `require`). */
export const WORKER_SOURCE = `(${peekWorker.toString()})()`

/** The worker's source with a `join` defined before it (as `globalThis.peekJoin`, which the program reads). */
function workerSource(join: PeekOptions['join']): string {
  return join ? `globalThis.peekJoin = (${join.toString()});\n${WORKER_SOURCE}` : WORKER_SOURCE
}

/** The error the asynchronous API would have rejected with, from what the worker could send. */
function toError([, code, message, syscall, errno]: BatchMessage['errors'][number]): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, syscall, errno })
}

/**
 * `FileSystem.peekFiles` of the Node file system: worker threads (`peekWorkerCount`) that look
 * at the files with synchronous calls, each its own batches of them, handed over in order.
 * Given the paths in chunks, the workers start at once and take each batch as soon as its paths
 * are known (a listing reads the directories of its buckets while the first logs are read).
 * Ending the iteration early (or an error) terminates the workers.
 */
export async function* peekFilesInWorker(
  paths: readonly string[] | AsyncIterable<readonly string[]>,
  headBytes: number,
  options: PeekOptions = {},
): AsyncGenerator<PeekedBatch> {
  const given = isPathList(paths) ? paths : undefined
  if (given?.length === 0) return
  const consumed = new Int32Array(new SharedArrayBuffer(4))
  // The number of batches is known once the last chunk is in (a list is one chunk).
  let batches: number | undefined
  const stride = given
    ? Math.min(peekWorkerCount(given.length, headBytes), Math.ceil(given.length / BATCH_FILES))
    : peekWorkerCount(Math.max(options.expectedFiles ?? 0, FILES_PER_WORKER), headBytes)
  const chunks: AsyncIterable<readonly string[]> = given ? (async function* () { yield given })() : (paths as AsyncIterable<readonly string[]>)
  // Batch b is worker (b % stride)'s: on a cold cache the workers' reads are in flight together.
  const arrived = new Map<number, BatchMessage>()
  let failure: Error | undefined
  let running = 0
  let wake: (() => void) | undefined
  const notify = () => {
    wake?.()
    wake = undefined
  }
  const workers: Worker[] = []
  const feeds: { port: MessagePort; posted: Int32Array }[] = []
  for (let k = 0; k < stride; k++) {
    const join = headBytes > 0 ? options.join : undefined
    const { port1, port2 } = new MessageChannel()
    const posted = new Int32Array(new SharedArrayBuffer(4))
    feeds.push({ port: port1, posted })
    const workerData = { stride, headBytes, batchFiles: BATCH_FILES, window: WINDOW, consumed, join: join !== undefined, port: port2, posted }
    const transferList = [port2]
    const worker = new Worker(workerSource(join), {
      eval: true,
      workerData,
      transferList,
      // The worker needs none of the parent's flags (a --cpu-prof of the parent, loaders of a test runner).
      execArgv: [],
      stdout: false,
      stderr: false,
    })
    alive++
    running++
    worker.on('message', (m: BatchMessage) => {
      arrived.set(m.start / BATCH_FILES, m)
      notify()
    })
    worker.on('error', (err) => {
      failure ??= err
      notify()
    })
    worker.on('exit', (code) => {
      alive--
      running--
      workers.splice(workers.indexOf(worker), 1)
      if (code !== 0) failure ??= new Error(`a file-peeking worker exited with code ${code}`)
      notify()
    })
    workers.push(worker)
  }
  // Each whole batch goes to its worker as soon as its paths are known, the last (maybe shorter)
  // one when the chunks end, then each worker is told that there are no more.
  let stopped = false
  let total = 0
  const post = (k: number, message: unknown) => {
    feeds[k]!.port.postMessage(message)
    Atomics.add(feeds[k]!.posted, 0, 1)
    Atomics.notify(feeds[k]!.posted, 0)
  }
  void (async () => {
    let pending: string[] = []
    let b = 0
    const send = () => {
      if (!stopped) post(b % stride, { start: b * BATCH_FILES, paths: pending })
      b++
      pending = []
    }
    for await (const chunk of chunks) {
      if (stopped) return
      for (const path of chunk) {
        pending.push(path)
        if (pending.length === BATCH_FILES) send()
      }
      total += chunk.length
    }
    if (stopped) return
    if (pending.length > 0) send()
    for (let k = 0; k < stride; k++) post(k, { end: true })
    batches = b
    notify()
  })().catch((err: unknown) => {
    failure ??= err instanceof Error ? err : new Error(String(err))
    notify()
  })
  let delivered = 0
  try {
    for (let next = 0; batches === undefined || next < batches; ) {
      const m = arrived.get(next)
      if (m === undefined) {
        if (failure) throw failure
        if (running === 0) throw new Error(`the file-peeking workers stopped after ${delivered} of ${total} files`)
        await new Promise<void>((resolve) => (wake = resolve))
        continue
      }
      arrived.delete(next)
      next++
      const errors = new Map(m.errors.map((e) => [e[0], toError(e)]))
      const heads = Buffer.from(m.heads.buffer, m.heads.byteOffset, m.heads.byteLength)
      const files: PeekedFile[] = new Array(m.lens.length)
      const taken = m.taken
      let offset = 0
      for (let i = 0; i < m.lens.length; i++) {
        const error = errors.get(i)
        if (error) {
          files[i] = { size: 0, mtimeMs: 0, error }
          continue
        }
        const len = m.lens[i]!
        files[i] =
          headBytes === 0
            ? { size: m.sizes[i]!, mtimeMs: m.mtimes[i]! }
            : taken?.[i] === 1
              ? { size: m.sizes[i]!, mtimeMs: m.mtimes[i]!, headEnd: 'line' }
              : { size: m.sizes[i]!, mtimeMs: m.mtimes[i]!, head: heads.subarray(offset, offset + len), headEnd: m.ends[i] === 1 ? 'line' : m.ends[i] === 0 ? 'eof' : 'more' }
        offset += len
      }
      delivered += files.length
      const batch: PeekedBatch = { start: m.start, files }
      if (m.joined && taken) batch.joined = { bytes: Buffer.from(m.joined.buffer, m.joined.byteOffset, m.joined.byteLength), taken, count: m.joinedCount ?? 0 }
      yield batch
      Atomics.add(consumed, 0, 1)
      Atomics.notify(consumed, 0)
    }
  } finally {
    stopped = true
    await Promise.all([...workers].map((w) => w.terminate()))
    // The chunks' iteration ends at its next chunk (it sees `stopped`); a listing's ends soon.
    for (const { port } of feeds) port.close()
  }
}

function isPathList(paths: readonly string[] | AsyncIterable<readonly string[]>): paths is readonly string[] {
  return Array.isArray(paths)
}
