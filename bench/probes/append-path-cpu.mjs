// The event loop's own share of an append, with the disk taken away: node:fs `write` and
// `fdatasync` are replaced by calls that complete on the next turn of the loop, so what is left
// is the JavaScript path (validation, serialization, queueing, promises). CPU time per batch of
// ten ~400-byte events, package vs protocol floor vs serialization alone, in interleaved blocks.
// `node bench/probes/append-path-cpu.mjs [blocks]` (after a build).
import fs from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import { createJsonlPersistence } from '../../dist/index.js'
import { callback, cleanup, events, median, scratch, serialize } from '../lib.mjs'
import { meta } from '../scenarios/append.mjs'

const blocks = Number(process.argv[2] ?? 30)
const PER_BLOCK = 1000
const dir = scratch('append-path-cpu')
const real = { write: fs.write, fdatasync: fs.fdatasync }
try {
  const batches = Array.from({ length: blocks * PER_BLOCK + 1 }, (_, b) => events(b * 10, 10))
  const p = createJsonlPersistence({ root: dir, dsyncWrites: false })
  await p.create(meta('cpu'))
  await p.append('cpu', batches[0])
  // From here on no byte reaches the disk: the seam's calls complete at once (on setImmediate).
  fs.write = (fd, buffer, offset, length, position, done) => setImmediate(done, null, length)
  fs.fdatasync = (fd, done) => setImmediate(done, null)
  syncBuiltinESMExports()
  let confirmedAt = performance.now()
  const floor = async (batch) => {
    const bytes = serialize(batch)
    await (performance.now() - confirmedAt < 5000 ? undefined : (confirmedAt = performance.now()))
    await callback((done) => fs.write(-1, bytes, 0, bytes.length, 0, done))
    await callback((done) => fs.fdatasync(-1, done))
  }
  let next = 1 // the package's seqs must continue; the others take any batch
  const any = () => batches[Math.min(next, batches.length - 1)]
  const contenders = [
    ['package append', () => p.append('cpu', batches[next++])],
    ['protocol floor', () => floor(any())],
    ['serialization alone', () => serialize(any())],
  ]
  const cpu = Object.fromEntries(contenders.map(([name]) => [name, []]))
  for (let r = 0; r < blocks; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const [name, run] = contenders[(r + k) % contenders.length]
      const before = process.cpuUsage()
      for (let i = 0; i < PER_BLOCK; i++) await run()
      const used = process.cpuUsage(before)
      cpu[name].push((used.user + used.system) / PER_BLOCK)
    }
  }
  console.log(`CPU µs per batch of 10 with no disk, median (min – max) of ${blocks} blocks of ${PER_BLOCK}:`)
  for (const [name, xs] of Object.entries(cpu)) {
    console.log(`  ${name.padEnd(22)} ${median(xs).toFixed(2).padStart(6)}  (${Math.min(...xs).toFixed(2)} – ${Math.max(...xs).toFixed(2)})`)
  }
} finally {
  Object.assign(fs, real)
  syncBuiltinESMExports()
  cleanup(dir)
}
