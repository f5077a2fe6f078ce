// Sixteen sessions appending at once: the package against sixteen raw non-blocking writers of
// the same bytes, on the same thread pool (libuv's, whatever UV_THREADPOOL_SIZE the process has).
import { closeSync, fdatasyncSync, openSync, writeFileSync, writeSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, events, interleave, scratch, serialize } from '../lib.mjs'
import { DSYNC_FLAGS, floorLease, meta, protocolFloor, writeAt } from './append.mjs'

/**
 * One run: `sessions` sessions each append `count` batches of 10, concurrently, through the
 * package; sixteen raw writers (FileHandle write + datasync) each write the same bytes to a
 * file of their own; sixteen raw O_DSYNC writers the same; sixteen protocol floors (append.mjs)
 * append the same events; one synchronous raw writer writes all of them one after another, to
 * one file (for scale). The contenders take turns every `chunk` batches, in a rotating
 * order, so that all of them see the same disk conditions. Returns events/s of each.
 * `modes` (dsync-config.mjs): the package's configuration for write + fdatasync (`pkg`) and, when
 * it has one, for O_DSYNC writes (`pkgDsync`).
 */
export async function concurrentRun(sessions, count, modes = { pair: {}, dsync: undefined }, chunk = 5) {
  const dir = scratch('concurrent')
  const closers = []
  try {
    const size = 10
    const rounds = Math.max(1, Math.floor(count / chunk))
    const ids = Array.from({ length: sessions }, (_, i) => `s${i}`)
    const batches = Array.from({ length: rounds * chunk + 1 }, (_, b) => events(b * size, size))
    const buffers = batches.map(serialize)
    const range = (r) => Array.from({ length: chunk }, (_, k) => (r - 1) * chunk + k + 1)
    const packageWith = async (config, prefix) => {
      const p = createJsonlPersistence({ root: join(dir, prefix), ...config })
      for (const id of ids) {
        await p.create(meta(id))
        await p.append(id, batches[0])
      }
      closers.push(() => p.closeAll())
      return (r) => Promise.all(ids.map(async (id) => {
        for (const b of range(r)) await p.append(id, batches[b])
      }))
    }
    const handles = await Promise.all(ids.map((id) => open(join(dir, `raw-async-${id}`), 'a')))
    closers.push(() => Promise.all(handles.map((h) => h.close())))
    const dsyncFds = ids.map((id) => openSync(join(dir, `raw-dsync-${id}`), DSYNC_FLAGS, 0o600))
    closers.push(() => dsyncFds.forEach((fd) => closeSync(fd)))
    const syncFd = openSync(join(dir, 'raw-sync'), 'a')
    closers.push(() => closeSync(syncFd))
    const pos = { async: ids.map(() => 0), dsync: ids.map(() => 0) }
    const floors = ids.map((id) => {
      const lock = join(dir, `floor-${id}.lock`)
      writeFileSync(lock, '{}\n')
      const lease = floorLease(lock)
      const fd = openSync(join(dir, `floor-${id}`), 'a', 0o600)
      closers.push(() => {
        lease.stop()
        closeSync(fd)
      })
      return { fd, pos: 0, lease, dsync: false }
    })
    const contenders = [
      ['pkg', await packageWith(modes.pair, 'package')],
      ['asyncRaw', (r) => Promise.all(handles.map(async (h, s) => {
        for (const b of range(r)) {
          await h.write(buffers[b], 0, buffers[b].length, pos.async[s])
          await h.datasync()
          pos.async[s] += buffers[b].length
        }
      }))],
      ['dsyncRaw', (r) => Promise.all(dsyncFds.map(async (fd, s) => {
        for (const b of range(r)) {
          await writeAt(fd, buffers[b], pos.dsync[s])
          pos.dsync[s] += buffers[b].length
        }
      }))],
      ['floor', (r) => Promise.all(floors.map(async (floor) => {
        for (const b of range(r)) await protocolFloor(floor, batches[b])
      }))],
      ['syncRaw', (r) => {
        for (const b of range(r)) {
          for (let s = 0; s < sessions; s++) {
            writeSync(syncFd, buffers[b])
            fdatasyncSync(syncFd)
          }
        }
      }],
    ]
    if (modes.dsync) contenders.push(['pkgDsync', await packageWith(modes.dsync, 'package-dsync')])
    const total = await interleave(contenders, rounds)
    return Object.fromEntries(Object.entries(total).map(([k, ms]) => [k, (sessions * rounds * chunk * size) / (ms / 1000)]))
  } finally {
    for (const close of closers.reverse()) await close()
    cleanup(dir)
  }
}
