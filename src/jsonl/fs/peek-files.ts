import { Worker } from 'node:worker_threads'
import type { PeekedFile, PeekedBatch } from './file-system.js'

/** Files a worker looks at before it hands them over (one message each batch). */
const BATCH_FILES = 512
/**
 * Batches the worker may be ahead of the consumer: what is queued is a few hundred KiB of first
 * lines (at most WINDOW + 1 batches of BATCH_FILES × headBytes: 10 MiB for 4 KiB heads).
 */
const WINDOW = 4

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
  errors: [index: number, code: string | undefined, message: string, syscall: string | undefined, errno: number | undefined][]
}

/**
 * The worker's whole program, run from its source text (`eval`), so that it needs no file of
 * its own next to the compiled one. It uses only `node:fs` synchronously: on its own thread a
 * synchronous call blocks nobody, and costs a few microseconds where the asynchronous API costs
 * a thread-pool round trip and a callback on the event loop (a listing of 100,000 logs spent
 * most of its time there, docs/decisions.md). After each batch it waits until the consumer is
 * at most `WINDOW` batches behind, so memory stays bounded whatever the number of files.
 */
function peekWorker(): void {
  const { parentPort, workerData } = require('node:worker_threads') as typeof import('node:worker_threads')
  const fs = require('node:fs') as typeof import('node:fs')
  const { paths, headBytes, batchFiles, window, consumed } = workerData as {
    paths: string[]
    headBytes: number
    batchFiles: number
    window: number
    consumed: Int32Array
  }
  const scratch = Buffer.allocUnsafe(Math.max(headBytes, 1))
  let posted = 0
  for (let start = 0; start < paths.length; start += batchFiles) {
    const n = Math.min(batchFiles, paths.length - start)
    const sizes = new Float64Array(n)
    const mtimes = new Float64Array(n)
    const lens = new Int32Array(n)
    const ends = new Int8Array(n)
    const kept = Buffer.allocUnsafe(headBytes > 0 ? n * headBytes : 0)
    let used = 0
    const errors: BatchMessage['errors'] = []
    for (let i = 0; i < n; i++) {
      const path = paths[start + i]!
      try {
        if (headBytes === 0) {
          const st = fs.statSync(path)
          sizes[i] = st.size
          mtimes[i] = st.mtimeMs
          continue
        }
        const fd = fs.openSync(path, 'r')
        let got: number
        let st: import('node:fs').Stats
        try {
          got = fs.readSync(fd, scratch, 0, headBytes, 0)
          st = fs.fstatSync(fd)
        } finally {
          fs.closeSync(fd)
        }
        // Kept only once the file is closed: a close that fails makes the file an error, and
        // the heads of the files after it stay where they belong.
        sizes[i] = st.size
        mtimes[i] = st.mtimeMs
        const nl = scratch.subarray(0, got).indexOf(10)
        const keep = nl >= 0 ? nl : got
        scratch.copy(kept, used, 0, keep)
        used += keep
        lens[i] = keep
        ends[i] = nl >= 0 ? 1 : got < headBytes ? 0 : 2
      } catch (err) {
        const e = err as NodeJS.ErrnoException
        lens[i] = -1
        errors.push([i, e.code, e.message, e.syscall, e.errno])
      }
    }
    const heads = new Uint8Array(used)
    heads.set(kept.subarray(0, used))
    const message: BatchMessage = { start, sizes, mtimes, lens, ends, heads, errors }
    parentPort!.postMessage(message, [sizes.buffer, mtimes.buffer, lens.buffer, ends.buffer, heads.buffer])
    posted++
    // Back-pressure: sleep while the consumer is more than `window` batches behind.
    for (let seen = Atomics.load(consumed, 0); posted - seen > window; seen = Atomics.load(consumed, 0)) {
      Atomics.wait(consumed, 0, seen)
    }
  }
}

let alive = 0
/** Workers of `peekFilesInWorker` that have not exited yet (none once every iteration has ended). */
export function peekWorkersAlive(): number {
  return alive
}

/** The worker's source: `peekWorker` called on its own (exported for a test that runs it with a stub `require`). */
export const WORKER_SOURCE = `(${peekWorker.toString()})()`

/** The error the asynchronous API would have rejected with, from what the worker could send. */
function toError([, code, message, syscall, errno]: BatchMessage['errors'][number]): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, syscall, errno })
}

/**
 * `FileSystem.peekFiles` of the Node file system: one worker thread per call, which looks at
 * the files in order with synchronous calls and hands them over in batches. Ending the
 * iteration early (or an error) terminates the worker.
 */
export async function* peekFilesInWorker(paths: readonly string[], headBytes: number): AsyncGenerator<PeekedBatch> {
  if (paths.length === 0) return
  const consumed = new Int32Array(new SharedArrayBuffer(4))
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { paths, headBytes, batchFiles: BATCH_FILES, window: WINDOW, consumed },
    // The worker needs none of the parent's flags (a --cpu-prof of the parent, loaders of a test runner).
    execArgv: [],
    stdout: false,
    stderr: false,
  })
  alive++
  const queue: BatchMessage[] = []
  let failure: Error | undefined
  let exited = false
  let wake: (() => void) | undefined
  const notify = () => {
    wake?.()
    wake = undefined
  }
  worker.on('message', (m: BatchMessage) => {
    queue.push(m)
    notify()
  })
  worker.on('error', (err) => {
    failure = err
    notify()
  })
  worker.on('exit', (code) => {
    alive--
    exited = true
    if (code !== 0) failure ??= new Error(`the file-peeking worker exited with code ${code}`)
    notify()
  })
  let delivered = 0
  try {
    while (delivered < paths.length) {
      const m = queue.shift()
      if (m === undefined) {
        if (failure) throw failure
        if (exited) throw new Error(`the file-peeking worker stopped after ${delivered} of ${paths.length} files`)
        await new Promise<void>((resolve) => (wake = resolve))
        continue
      }
      const errors = new Map(m.errors.map((e) => [e[0], toError(e)]))
      const heads = Buffer.from(m.heads.buffer, m.heads.byteOffset, m.heads.byteLength)
      const files: PeekedFile[] = new Array(m.lens.length)
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
            : { size: m.sizes[i]!, mtimeMs: m.mtimes[i]!, head: heads.subarray(offset, offset + len), headEnd: m.ends[i] === 1 ? 'line' : m.ends[i] === 0 ? 'eof' : 'more' }
        offset += len
      }
      delivered += files.length
      yield { start: m.start, files }
      Atomics.add(consumed, 0, 1)
      Atomics.notify(consumed, 0)
    }
  } finally {
    if (!exited) await worker.terminate()
  }
}
