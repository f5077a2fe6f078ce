// Latency of each append when sixteen sessions append at once: the package against sixteen
// protocol floors, in interleaved rounds. Each append waits for the event loop to handle the
// other sessions' completions too, so what the loop spends per append counts up to sixteen
// times in every append's latency. `node bench/probes/latency16.mjs [rounds]` (after a build).
import { closeSync, openSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, events, interleave, now, scratch } from '../lib.mjs'
import { floorLease, meta, protocolFloor } from '../scenarios/append.mjs'

const rounds = Number(process.argv[2] ?? 30)
const CHUNK = 5
const dir = scratch('latency16')
const ids = Array.from({ length: 16 }, (_, i) => `s${i}`)
const p = createJsonlPersistence({ root: join(dir, 'package'), dsyncWrites: false })
const floors = ids.map((id) => {
  const lock = join(dir, `floor-${id}.lock`)
  writeFileSync(lock, '{}\n')
  return { fd: openSync(join(dir, `floor-${id}`), 'a', 0o600), pos: 0, lease: floorLease(lock), dsync: false }
})
try {
  const batches = Array.from({ length: rounds * CHUNK + 1 }, (_, b) => events(b * 10, 10))
  const range = (r) => Array.from({ length: CHUNK }, (_, k) => (r - 1) * CHUNK + k + 1)
  for (const id of ids) {
    await p.create(meta(id))
    await p.append(id, batches[0])
  }
  const latency = { package: [], floor: [] }
  const timed = async (name, append) => {
    const t = now()
    await append()
    latency[name].push(now() - t)
  }
  await interleave([
    ['package', (r) => Promise.all(ids.map(async (id) => {
      for (const b of range(r)) await timed('package', () => p.append(id, batches[b]))
    }))],
    ['floor', (r) => Promise.all(floors.map(async (f) => {
      for (const b of range(r)) await timed('floor', () => protocolFloor(f, batches[b]))
    }))],
  ], rounds)
  const at = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]
  console.log(`append latency, ms, 16 sessions, ${rounds * CHUNK} batches of 10 per session:`)
  for (const [name, xs] of Object.entries(latency)) {
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length
    console.log(`  ${name.padEnd(8)} p10 ${at(xs, 0.1).toFixed(2)}  p50 ${at(xs, 0.5).toFixed(2)}  p90 ${at(xs, 0.9).toFixed(2)}  p99 ${at(xs, 0.99).toFixed(2)}  mean ${mean.toFixed(2)}`)
  }
} finally {
  await p.closeAll()
  for (const f of floors) {
    f.lease.stop()
    closeSync(f.fd)
  }
  cleanup(dir)
}
