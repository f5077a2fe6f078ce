import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync, unlinkSync, writeSync, openSync, closeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isSessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import { sessionPersistencePlugin } from '../plugin/plugin.js'
import { createReferenceHost } from '../testing/reference-host.js'
import { jsonlPath } from '../session/location.js'

export interface DiskFullReport {
  cycles: number
  enospcSeen: number
  failures: string[]
}

/** Mounts a small tmpfs (root only); returns undefined with the reason when it cannot. */
export function mountTmpfs(sizeBytes: number): { dir: string; unmount: () => void } | { unavailable: string } {
  const dir = mkdtempSync(join(tmpdir(), 'spj-full-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes}`, 'tmpfs', dir], { stdio: 'pipe' })
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    return { unavailable: `cannot mount a tmpfs (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})` }
  }
  return {
    dir,
    unmount: () => {
      execFileSync('umount', [dir], { stdio: 'pipe' })
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Fills the file system under `dir` until ENOSPC; returns the filler's path. */
function fill(dir: string): string {
  const path = join(dir, 'filler')
  const fd = openSync(path, 'w')
  const chunk = Buffer.alloc(4096, 0x66)
  try {
    for (;;) writeSync(fd, chunk)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
  } finally {
    closeSync(fd)
  }
  return path
}

/** A tmpfs large enough for `cycles` cycles of logs plus room to fill. */
export function diskFullBytes(cycles: number): number {
  return (2 << 20) + cycles * (128 << 10)
}

/**
 * Real disk-full cycles on a tmpfs: the disk is filled, an append gets ENOSPC and must reject
 * with E_IO leaving the log at its acknowledged length, the plugin keeps its events buffered,
 * and once space is freed the retry writes everything exactly once.
 */
export async function runDiskFull(dir: string, cycles: number): Promise<DiskFullReport> {
  const failures: string[] = []
  let enospcSeen = 0
  const root = join(dir, 'sessions')
  const direct = createJsonlPersistence({ root })
  const plugin = sessionPersistencePlugin({ root, flushDelayMs: 5 })
  const pluginErrors: string[] = []
  plugin.on('error', (e) => pluginErrors.push(e.code))
  const host = createReferenceHost({ cwd: '/full' })
  await plugin.apply(host)
  const s = host.startSession({ id: 'via-plugin' })
  await direct.create({ id: 'direct', createdAt: Date.now(), delegationDepth: 0 })
  let directSeq = 0
  const batch = (n: number) =>
    Array.from({ length: n }, () => ({ seq: directSeq++, type: 'assistant/chunk', time: Date.now(), data: { text: 'z'.repeat(2000) } }))
  try {
    for (let c = 0; c < cycles && failures.length < 5; c++) {
      try {
        await cycle(c)
      } catch (err) {
        failures.push(`cycle ${c}: unexpected ${String(err)}`)
      }
    }
    async function cycle(c: number) {
      s.runTurn({ user: `cycle ${c}`, steps: [{ text: 'fine', chunks: 2 }] })
      await plugin.flush()
      await direct.append('direct', batch(3))
      const logPath = jsonlPath(direct.locate({ id: 'direct', createdAt: 0, delegationDepth: 0 }))
      const ackedSize = statSync(logPath).size
      const filler = fill(dir)
      // The direct append hits ENOSPC: E_IO, and the log is back at its acknowledged length.
      const start = directSeq
      const err = await direct.append('direct', batch(20)).then(
        () => undefined,
        (e: unknown) => e,
      )
      if (!isSessionPersistenceError(err, 'E_IO')) failures.push(`cycle ${c}: append on a full disk gave ${String(err)}`)
      else if ((err.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOSPC') enospcSeen++
      if (statSync(logPath).size !== ackedSize) failures.push(`cycle ${c}: the log was not rolled back`)
      directSeq = start
      // The plugin keeps its events buffered while the disk is full.
      s.runTurn({ user: `while full ${c}`, steps: [{ text: 'y'.repeat(5000), chunks: 4, toolCalls: [{ name: 'bash' }] }] })
      const flushed = await plugin.flush().then(
        () => 'resolved',
        () => 'rejected',
      )
      if (flushed !== 'rejected') failures.push(`cycle ${c}: flush resolved on a full disk`)
      unlinkSync(filler)
      await direct.append('direct', batch(20))
      await plugin.flush()
    }
    await plugin.dispose()
    await direct.closeAll()
    const check = createJsonlPersistence({ root })
    const stored = await check.inspect('via-plugin')
    if (stored.events.length !== s.events.length || JSON.stringify(stored.events) !== JSON.stringify(s.events)) {
      failures.push(`the plugin's log differs from the host's events (${stored.events.length} vs ${s.events.length})`)
    }
    const d = await check.inspect('direct')
    if (d.events.length !== directSeq || d.events.some((e, i) => e.seq !== i)) failures.push('the direct log lost or duplicated events')
    if (!pluginErrors.includes('E_IO')) failures.push('the plugin never reported the failed drain')
  } finally {
    await plugin.dispose().catch(() => {})
    await direct.closeAll()
  }
  return { cycles, enospcSeen, failures }
}
