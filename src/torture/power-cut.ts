import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createInterface } from 'node:readline'
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
  /**
   * What fails the run: damage no power cut of a correct rig explains (acknowledged events
   * changed, a log that does not load), or losses of acknowledged tails that the control does
   * not explain (see `judgeLosses`).
   */
  failures: string[]
  /** The package's lost acknowledged tails, one line per cut that had one (explained or not). */
  packageLosses: string[]
  /** The raw write + fdatasync control writer, in the same cuts, on the same file system. */
  control: { ackedRecords: number; losses: string[] }
  /** Cuts in which the package lost an acknowledged tail, and in which the control lost acknowledged records. */
  packageLossCuts: number
  controlLossCuts: number
  verdict: LossVerdict
}

/**
 * How the package's losses compare with the control's over `cuts` paired cuts (both writers
 * frozen and cut at the same instant):
 * - the control lost nothing: the rig kept every acknowledged write in this run, so any tail
 *   the package lost is a finding (`fail` when it lost one);
 * - the control lost too (a host whose disk is busy can lose an acknowledged batch even for a
 *   raw writer): the package fails only if it lost more often, by an exact one-sided McNemar
 *   test (a sign test on the discordant cuts: under "both lose with the same probability in a
 *   cut", a cut where exactly one of them lost is the package's with probability 1/2) at
 *   `alpha` (0.05). Paired, because both writers share every cut and its conditions.
 */
export interface LossVerdict {
  fail: boolean
  /** Cuts where only the package lost, and where only the control lost. */
  onlyPackage: number
  onlyControl: number
  /** The one-sided p-value of the sign test (1 when nothing is discordant). */
  pValue: number
  reason: string
}

export const LOSS_ALPHA = 0.05

/** P(X >= k) for X ~ Binomial(n, 1/2). */
export function signTestPValue(k: number, n: number): number {
  if (k <= 0) return 1
  let term = 2 ** -n // C(n, 0) / 2^n, built up term by term (n stays small)
  let tail = 0
  for (let i = 0; i <= n; i++) {
    if (i >= k) tail += term
    term = (term * (n - i)) / (i + 1)
  }
  return Math.min(1, tail)
}

/** The verdict over paired cuts: `lost[i]` = [package lost a tail in cut i, control lost in cut i]. */
export function judgeLosses(lost: readonly (readonly [boolean, boolean])[], alpha = LOSS_ALPHA): LossVerdict {
  const onlyPackage = lost.filter(([p, c]) => p && !c).length
  const onlyControl = lost.filter(([p, c]) => !p && c).length
  const packageLost = lost.filter(([p]) => p).length
  const controlLost = lost.filter(([, c]) => c).length
  const pValue = signTestPValue(onlyPackage, onlyPackage + onlyControl)
  if (packageLost === 0) return { fail: false, onlyPackage, onlyControl, pValue, reason: 'the package lost nothing' }
  if (controlLost === 0) {
    return { fail: true, onlyPackage, onlyControl, pValue, reason: `the package lost acknowledged events in ${packageLost} of ${lost.length} cuts and the control in none: not explained by the rig` }
  }
  const fail = pValue < alpha
  return {
    fail,
    onlyPackage,
    onlyControl,
    pValue,
    reason: `package lost in ${packageLost} cuts, control in ${controlLost} (only the package: ${onlyPackage}, only the control: ${onlyControl}); one-sided exact McNemar p = ${pValue.toPrecision(3)} ${fail ? '<' : '>='} ${alpha}`,
  }
}

/**
 * The control: a raw writer with no package code. It creates its directory and its file, syncing
 * each parent, then
 * appends batches of 1–10 fixed records with `write` and `fdatasync`, printing the number of
 * records written after each `fdatasync` returned, with a short pause between batches (about the
 * agent's cadence, so it does not flood the device).
 */
const CONTROL_SCRIPT = `
const fs = require('node:fs'), path = require('node:path')
const file = process.env.SPJ_CONTROL_FILE
const rec = (i) => i + ' ' + 'x'.repeat(120 + ((i * 37) % 160)) + '\\n'
const syncDir = (d) => { const h = fs.openSync(d, 'r'); fs.fsyncSync(h); fs.closeSync(h) }
fs.mkdirSync(path.dirname(file), { recursive: true })
syncDir(path.dirname(path.dirname(file)))
const fd = fs.openSync(file, 'wx', 0o600)
syncDir(path.dirname(file))
const pause = new Int32Array(new SharedArrayBuffer(4))
let i = 0
for (;;) {
  const n = 1 + (i % 10)
  let s = ''
  for (let k = 0; k < n; k++) s += rec(i + k)
  const buf = Buffer.from(s)
  for (let off = 0; off < buf.length; ) off += fs.writeSync(fd, buf, off, buf.length - off)
  fs.fdatasyncSync(fd)
  i += n
  fs.writeSync(1, i + '\\n')
  Atomics.wait(pause, 0, 0, 2)
}
`

/** How many of the control's records survive, as a valid prefix (a torn or zeroed tail ends it). */
export function controlRecordsKept(text: string): number {
  const lines = text.split('\n')
  let kept = 0
  for (let i = 0; i < lines.length - 1; i++) {
    const expected = `${i} ${'x'.repeat(120 + ((i * 37) % 160))}`
    if (lines[i] !== expected) break
    kept++
  }
  return kept
}

interface ControlWriter {
  child: ChildProcess
  file: string
  acked: () => number
  acknowledged: (n: number) => Promise<void>
  exited: Promise<void>
}

function startControl(file: string): ControlWriter {
  const child = spawn(process.execPath, ['-e', CONTROL_SCRIPT], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SPJ_CONTROL_FILE: file } })
  child.stderr!.resume()
  let acked = 0
  const waiting: { n: number; resolve: () => void }[] = []
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const n = Number(line)
    if (!Number.isSafeInteger(n) || n <= acked) return // a line torn by the kill
    acked = n
    for (const w of waiting) if (acked >= w.n) w.resolve()
  })
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()))
  return {
    child,
    file,
    acked: () => acked,
    acknowledged: (n) => new Promise<void>((resolve) => (acked >= n ? resolve() : waiting.push({ n, resolve }))),
    exited,
  }
}

/** A problem `verifyAcked` reports that a lost acknowledged tail explains (the log loads, it is only shorter). */
const TAIL_LOSS = /^[^:]+: \d+ acknowledged events lost$/

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
 * Real power cuts: a file system image on a loop device, the torture agent and a raw control
 * writer writing to it at once, and `xfs_io -x -c shutdown` at a random moment — the file system
 * stops without flushing its journal, as in a power cut. Both writers are frozen first, then
 * killed; the file system is unmounted and mounted again (journal replay), and every
 * acknowledged event and control record checked. The kernel decides what survived; the control
 * says what this rig, on this host, in this run, keeps of acknowledged writes.
 */
export async function runPowerCuts(config: PowerCutConfig, cuts: number, seed = 3): Promise<PowerCutReport> {
  const work = mkdtempSync(join(tmpdir(), 'spj-power-'))
  const img = join(work, 'disk.img')
  const mnt = join(work, 'mnt')
  mkdirSync(mnt)
  const failures: string[] = []
  const packageLosses: string[] = []
  const controlLosses: string[] = []
  const paired: [boolean, boolean][] = []
  let controlAcked = 0
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
    const controlDir = join(mnt, 'control')
    for (let c = 0; c < cuts; c++) {
      mount()
      const agent = startAgent(root, Math.floor(rand() * 2 ** 31), `main-${Math.floor(c / 10)}`, acked)
      const control = startControl(join(controlDir, `cut-${c + 1}.log`))
      // The cut comes after a chosen number of acknowledgements of both (explicit, not a sleep):
      // every cut has acknowledged history to lose, however slow the machine.
      await Promise.race([Promise.all([agent.acknowledged(8 + Math.floor(rand() * 24)), control.acknowledged(20)]), agent.exited, control.exited])
      if (agent.child.exitCode !== null || control.child.exitCode !== null) {
        const who = agent.child.exitCode !== null ? `the agent exited by itself: ${agent.stderr().trim().split('\n').slice(-3).join(' | ')}` : 'the control writer exited by itself'
        failures.push(`cut ${c + 1}: ${who}`)
        agent.child.kill('SIGKILL')
        control.child.kill('SIGKILL')
        await Promise.all([agent.exited, control.exited])
        umount()
        break
      }
      // A power cut stops the processes and the disk at the same instant. Freeze both writers
      // first: every acknowledgement they printed then had its sync return before the cut.
      // (Killing after the shutdown let an fdatasync racing the shutdown report success; such a
      // late acknowledgement cannot happen in a real power cut.)
      agent.child.kill('SIGSTOP')
      control.child.kill('SIGSTOP')
      run('xfs_io', ['-x', '-c', 'shutdown', mnt])
      agent.child.kill('SIGKILL')
      control.child.kill('SIGKILL')
      await Promise.all([agent.exited, control.exited])
      umount()
      mount() // journal replay
      // Checked read-only: the next agent's own load repairs what the cut left.
      const { problem, problems } = await verifyAcked(root, acked)
      const controlAck = control.acked()
      controlAcked += controlAck
      const kept = existsSync(control.file) ? controlRecordsKept(readFileSync(control.file, 'utf8')) : 0
      umount()
      done++
      const controlLost = kept < controlAck
      if (controlLost) controlLosses.push(`cut ${c + 1}: control kept ${kept} of ${controlAck} acknowledged records`)
      // A lost tail only when every session's problem is one: changed events anywhere are damage.
      const packageLost = problems.length > 0 && problems.every((pr) => TAIL_LOSS.test(pr))
      if (packageLost) packageLosses.push(`cut ${c + 1}: ${problem}`)
      else if (problem) failures.push(`cut ${c + 1}: ${problem}`) // damage, not a lost tail: never the rig's
      paired.push([packageLost, controlLost])
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
  const verdict = judgeLosses(paired)
  if (verdict.fail) failures.push(`${verdict.reason}; ${packageLosses.join('; ')}`)
  return {
    config: config.name,
    cuts: done,
    ackedEvents: countAcked(acked),
    failures,
    packageLosses,
    control: { ackedRecords: controlAcked, losses: controlLosses },
    packageLossCuts: paired.filter(([p]) => p).length,
    controlLossCuts: paired.filter(([, c]) => c).length,
    verdict,
  }
}
