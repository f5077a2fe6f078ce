// Where an append's time goes when the machine is busy: CPU time (user + system, every thread of
// the process, so the thread pool's syscalls count too) per batch of ten ~400-byte events, for
// each sixteen-session contender of bench/scenarios/concurrent.mjs, in blocks interleaved in a
// rotating order. CPU time is far less disturbed by other processes than wall time; when the
// event loop or the two cores are the bottleneck, throughput follows it.
// `node bench/probes/append-cpu.mjs [rounds] [batches per session per block]` (after a build).
import { closeSync, openSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, events, median, scratch, serialize } from '../lib.mjs'
import { DSYNC_FLAGS, floorLease, meta, protocolFloor, writeAt } from '../scenarios/append.mjs'
import { packageWriteModes } from '../scenarios/dsync-config.mjs'

const rounds = Number(process.argv[2] ?? 24)
const chunk = Number(process.argv[3] ?? 25)
const SESSIONS = 16
const dir = scratch('append-cpu')
const closers = []
try {
  const modes = packageWriteModes()
  const ids = Array.from({ length: SESSIONS }, (_, i) => `s${i}`)
  const batches = Array.from({ length: rounds * chunk + 1 }, (_, b) => events(b * 10, 10))
  const buffers = batches.map(serialize)
  const range = (r) => Array.from({ length: chunk }, (_, k) => r * chunk + k + 1)
  const each = (writers, write) => (r) => Promise.all(writers.map(async (w, s) => {
    for (const b of range(r)) await write(w, s, b)
  }))
  const packageWith = async (config, name) => {
    const p = createJsonlPersistence({ root: join(dir, name), ...config })
    for (const id of ids) {
      await p.create(meta(id))
      await p.append(id, batches[0])
    }
    closers.push(() => p.closeAll())
    return each(ids, (id, _s, b) => p.append(id, batches[b]))
  }
  const floors = (dsync) => ids.map((id) => {
    const lock = join(dir, `${dsync ? 'dsync-' : ''}floor-${id}.lock`)
    writeFileSync(lock, '{}\n')
    const lease = floorLease(lock)
    const fd = openSync(join(dir, `${dsync ? 'dsync-' : ''}floor-${id}`), dsync ? DSYNC_FLAGS : 'a', 0o600)
    closers.push(() => {
      lease.stop()
      closeSync(fd)
    })
    return { fd, pos: 0, lease, dsync }
  })
  const handles = await Promise.all(ids.map((id) => open(join(dir, `raw-${id}`), 'a')))
  closers.push(() => Promise.all(handles.map((h) => h.close())))
  const dsyncFds = ids.map((id) => openSync(join(dir, `raw-dsync-${id}`), DSYNC_FLAGS, 0o600))
  closers.push(() => dsyncFds.forEach((fd) => closeSync(fd)))
  const pos = { raw: ids.map(() => 0), dsync: ids.map(() => 0) }
  const contenders = [
    ['package (write + fdatasync)', await packageWith(modes.pair, 'package')],
    ['protocol floor (write + fdatasync)', each(floors(false), (f, _s, b) => protocolFloor(f, batches[b]))],
    ['raw FileHandle write + datasync', each(handles, async (h, s, b) => {
      await h.write(buffers[b], 0, buffers[b].length, pos.raw[s])
      await h.datasync()
      pos.raw[s] += buffers[b].length
    })],
    ['protocol floor (O_DSYNC)', each(floors(true), (f, _s, b) => protocolFloor(f, batches[b]))],
    ['raw O_DSYNC write', each(dsyncFds, async (fd, s, b) => {
      await writeAt(fd, buffers[b], pos.dsync[s])
      pos.dsync[s] += buffers[b].length
    })],
  ]
  if (modes.dsync) contenders.splice(3, 0, ['package (O_DSYNC)', await packageWith(modes.dsync, 'package-dsync')])
  const cpu = Object.fromEntries(contenders.map(([name]) => [name, []]))
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const [name, run] = contenders[(r + k) % contenders.length]
      const before = process.cpuUsage()
      await run(r)
      const used = process.cpuUsage(before)
      cpu[name].push((used.user + used.system) / (SESSIONS * chunk))
    }
  }
  console.log(`CPU µs per batch of 10, ${SESSIONS} sessions, median (min – max) of ${rounds} blocks of ${SESSIONS * chunk} batches:`)
  for (const [name, xs] of Object.entries(cpu)) {
    console.log(`  ${name.padEnd(36)} ${median(xs).toFixed(1).padStart(6)}  (${Math.min(...xs).toFixed(1)} – ${Math.max(...xs).toFixed(1)})`)
  }
} finally {
  for (const close of closers.reverse()) await close()
  cleanup(dir)
}
