import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Acked, countAcked, startAgent, verifyAcked } from './kill-runner.js'
import { seededRandom } from './random.js'

export interface PowerCutConfig {
  name: string
  fsType: 'ext4' | 'xfs'
  mountOptions?: string
}

export const POWER_CUT_CONFIGS: readonly PowerCutConfig[] = [
  { name: 'ext4', fsType: 'ext4' },
  { name: 'ext4 nodelalloc', fsType: 'ext4', mountOptions: 'nodelalloc' },
  { name: 'ext4 data=journal', fsType: 'ext4', mountOptions: 'data=journal' },
  { name: 'xfs', fsType: 'xfs' },
]

export interface PowerCutReport {
  config: string
  cuts: number
  ackedEvents: number
  failures: string[]
}

const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: 'pipe' }).toString().trim()

/** Why real power cuts cannot run here, or undefined when they can. */
export function powerCutUnavailable(fsType: 'ext4' | 'xfs'): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (mount, losetup)'
  for (const tool of ['losetup', 'xfs_io', fsType === 'xfs' ? 'mkfs.xfs' : 'mkfs.ext4']) {
    try {
      run('sh', ['-c', `command -v ${tool}`])
    } catch {
      return `${tool} is not installed (Debian: ${tool === 'losetup' ? 'mount' : fsType === 'ext4' && tool !== 'xfs_io' ? 'e2fsprogs' : 'xfsprogs'})`
    }
  }
  try {
    run('losetup', ['-f']) // prints the first free loop device; fails when there is none
  } catch {
    return 'no free loop device (/dev/loop*)'
  }
  return undefined
}

/**
 * Real power cuts: a file system image on a loop device, the torture agent writing to it, and
 * `xfs_io -x -c shutdown` at a random moment — the file system stops without flushing its
 * journal, as in a power cut. Then the agent is killed, the file system unmounted and mounted
 * again (journal replay), and every acknowledged event checked. The kernel decides what survived.
 */
export async function runPowerCuts(config: PowerCutConfig, cuts: number, seed = 3): Promise<PowerCutReport> {
  const work = mkdtempSync(join(tmpdir(), 'spj-power-'))
  const img = join(work, 'disk.img')
  const mnt = join(work, 'mnt')
  mkdirSync(mnt)
  const failures: string[] = []
  const acked: Acked = new Map()
  const rand = seededRandom(seed)
  let dev: string | undefined
  let mounted = false
  const mount = () => {
    run('mount', [...(config.mountOptions ? ['-o', config.mountOptions] : []), dev!, mnt])
    mounted = true
  }
  const umount = () => {
    run('umount', [mnt])
    mounted = false
  }
  let done = 0
  try {
    run('truncate', ['-s', config.fsType === 'xfs' ? '320M' : '128M', img])
    if (config.fsType === 'xfs') run('mkfs.xfs', ['-q', '-f', img])
    else run('mkfs.ext4', ['-q', '-F', img])
    dev = run('losetup', ['-f', '--show', img])
    const root = join(mnt, 'sessions')
    for (let c = 0; c < cuts; c++) {
      mount()
      const agent = startAgent(root, Math.floor(rand() * 2 ** 31), `main-${Math.floor(c / 10)}`, acked)
      // The cut comes after a chosen number of acknowledgements (explicit, not a sleep): every
      // cut has acknowledged history to lose, however slow the machine.
      await Promise.race([agent.acknowledged(8 + Math.floor(rand() * 24)), agent.exited])
      if (agent.child.exitCode !== null) {
        failures.push(`cut ${c + 1}: the agent exited by itself: ${agent.stderr().trim().split('\n').slice(-3).join(' | ')}`)
        umount()
        break
      }
      // A power cut stops the process and the disk at the same instant. Freeze the agent first:
      // every acknowledgement it printed then had its sync return before the cut. (Killing it
      // after the shutdown let an fdatasync racing the shutdown report success; such a late
      // acknowledgement cannot happen in a real power cut.)
      agent.child.kill('SIGSTOP')
      run('xfs_io', ['-x', '-c', 'shutdown', mnt])
      agent.child.kill('SIGKILL')
      await agent.exited
      umount()
      mount() // journal replay
      // Checked read-only: the next agent's own load repairs what the cut left.
      const { problem } = await verifyAcked(root, acked)
      umount()
      done++
      if (problem) failures.push(`cut ${c + 1}: ${problem}`)
      if (failures.length >= 5) break
    }
  } catch (err) {
    failures.push(`setup or cut failed: ${String((err as { stderr?: Buffer }).stderr ?? err)}`)
  } finally {
    try {
      if (mounted) umount()
    } catch {
      // best effort
    }
    if (dev) run('losetup', ['-d', dev])
    rmSync(work, { recursive: true, force: true })
  }
  return { config: config.name, cuts: done, ackedEvents: countAcked(acked), failures }
}
