import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { createJsonlPersistence } from '../jsonl-persistence.js'
import { HashChain } from './hash-chain.js'

export interface KillReport {
  kills: number
  sessions: number
  /** Acknowledged events checked after the last kill (the whole acknowledged history). */
  ackedEvents: number
  lost: number
  failures: string[]
}

export type Acked = Map<string, { count: number; digest: string }>

const AGENT = fileURLToPath(new URL('./agent.js', import.meta.url))

export interface RunningAgent {
  child: ChildProcess
  /** Resolves at the agent's first acknowledgement (it has resumed its session). */
  ready: Promise<void>
  exited: Promise<number | null>
  /** Sessions the agent acknowledged something of. */
  touched: Set<string>
  stderr: () => string
}

/** Starts the torture agent; every acknowledgement it prints is recorded in `acked`. */
export function startAgent(root: string, seed: number, mainId: string, acked: Acked): RunningAgent {
  const child = spawn(process.execPath, [AGENT, root, String(seed), mainId], { stdio: ['ignore', 'pipe', 'pipe'] })
  let err = ''
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString()
  })
  const touched = new Set<string>([mainId])
  let ready!: () => void
  const readyP = new Promise<void>((r) => (ready = r))
  createInterface({ input: child.stdout! }).on('line', (line) => {
    ready()
    let msg: { id: string; count: number; digest: string }
    try {
      msg = JSON.parse(line)
    } catch {
      return // a line torn by the kill
    }
    touched.add(msg.id)
    const prev = acked.get(msg.id)
    if (!prev || msg.count >= prev.count) acked.set(msg.id, { count: msg.count, digest: msg.digest })
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return { child, ready: readyP, exited, touched, stderr: () => err }
}

/** Loads every acknowledged session (or only `only`) and checks its acknowledged events. */
export async function verifyAcked(root: string, acked: Acked, only?: Set<string>): Promise<string | undefined> {
  const p = createJsonlPersistence({ root })
  try {
    for (const [id, a] of acked) {
      if (only && !only.has(id)) continue
      if (a.count === 0) continue // nothing acknowledged yet: nothing was ever materialized
      const loaded = await p.load(id)
      if (loaded.events.length < a.count) return `${id}: ${a.count - loaded.events.length} acknowledged events lost`
      if (HashChain.of(loaded.events, a.count).digest !== a.digest) return `${id}: acknowledged events lost or changed`
      await p.close(id)
    }
    return undefined
  } catch (err) {
    return `load failed: ${String(err)}`
  } finally {
    await p.closeAll()
  }
}

export function lcg(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 2147483648
  }
}

export function countAcked(acked: Acked): number {
  let n = 0
  for (const a of acked.values()) n += a.count
  return n
}

/**
 * Runs the torture agent in a child process and kills it with SIGKILL at a random moment, `kills`
 * times; after every kill, loads the sessions it touched in this process and checks that each
 * event the agent saw acknowledged is present and unchanged (hash chain). The next agent resumes
 * from there. Everything is checked once more at the end.
 */
export async function runKillTorture(options: { root: string; kills: number; seed?: number; maxDelayMs?: number }): Promise<KillReport> {
  const acked: Acked = new Map()
  const failures: string[] = []
  const rand = lcg(options.seed ?? 1)
  let kills = 0
  for (let k = 0; k < options.kills; k++) {
    const agent = startAgent(options.root, Math.floor(rand() * 2 ** 31), `main-${Math.floor(k / 25)}`, acked)
    // Most kills land while turns, appends and forks run; one in six lands during start-up,
    // where the agent loads (and repairs) what the previous kill left.
    const duringStartup = rand() < 1 / 6
    if (!duringStartup) await Promise.race([agent.ready, agent.exited])
    const delay = Math.floor(rand() * (duringStartup ? 400 : (options.maxDelayMs ?? 150)))
    const early = await Promise.race([agent.exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), delay))])
    if (early) {
      failures.push(`agent exited by itself before the kill: ${agent.stderr().trim().split('\n').slice(-3).join(' | ')}`)
      break
    }
    agent.child.kill('SIGKILL')
    await agent.exited
    kills++
    const problem = await verifyAcked(options.root, acked, agent.touched)
    if (problem) failures.push(`after kill ${kills}: ${problem}`)
    if (failures.length >= 5) break
  }
  const final = await verifyAcked(options.root, acked)
  if (final) failures.push(`final check: ${final}`)
  return { kills, sessions: acked.size, ackedEvents: countAcked(acked), lost: failures.filter((f) => f.includes('lost')).length, failures }
}
