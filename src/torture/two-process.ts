// The crash model with two processes. Two persistence instances, each on its own seam onto one
// crash-modelled disk (as two processes share one file system), share a root. One of them is
// paused before its k-th file-system call, for every k, while the other runs to completion;
// then the first resumes. At every change to the disk, every state a power cut could leave is
// recovered by a fresh instance and checked: an acknowledged event is never lost, whichever
// process created the directories it relies on, and a crash at any step of a lock takeover
// never leaves a session unloadable once the crash is `staleLockMs` old.
import { createHash } from 'node:crypto'
import type { SessionEvent } from '../session/schema.js'
import { isSessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl/jsonl-persistence.js'
import type { JsonlSessionPersistence } from '../persistence.js'
import { type CrashFileSystem, type CrashImage, type CrashSeam, createCrashFileSystem, type UnexploredStates } from '../testing/crash-fs.js'
import { expectedClosers } from './closers-oracle.js'
import { addUnexplored, checkImage, type Expectation, noneUnexplored } from './crash-enumeration.js'

const ROOT = '/sessions'
/** The smallest `staleLockMs` the contract allows: recovery is checked this long (plus 1 ms) after the crash. */
export const STALE_MS = 1000

export interface TwoProcessResult {
  /** Interleavings run: one per step the paused process was stopped at. */
  schedules: number
  crashPoints: number
  /** Distinct (state, expectation) pairs recovered and checked. */
  states: number
  unexplored: UnexploredStates
  /** Every state that failed its check (the list of failures stops at 40). */
  failedStates: number
  failures: string[]
}

interface Model {
  acked: SessionEvent[]
  inflight: SessionEvent[]
}

const T0 = 1_764_489_600_000

/** A closed turn of `n` chunks, or (open) a turn left with a pending tool call. */
function turn(from: number, turnNo: number, n: number, open = false): SessionEvent[] {
  const out: Omit<SessionEvent, 'seq'>[] = [
    { type: 'turn/start', time: T0 + from, data: { turn: turnNo } },
    { type: 'user/message', time: T0 + from, data: { content: `question ${turnNo}` } },
  ]
  for (let i = 0; i < n; i++) out.push({ type: 'assistant/chunk', time: T0 + from, data: { turn: turnNo, step: 0, chunk: { text: `part ${i} `.repeat(20) } } })
  if (open) {
    out.push({ type: 'step/start', time: T0 + from, data: { turn: turnNo, step: 0 } })
    out.push({ type: 'tool/call', time: T0 + from, data: { turn: turnNo, step: 0, callId: `c${turnNo}`, name: 'bash', arguments: { cmd: 'ls' } } })
  } else {
    out.push({ type: 'turn/end', time: T0 + from, data: { turn: turnNo, reason: { kind: 'completed' } } })
  }
  return out.map((e, i) => ({ ...e, seq: from + i }) as SessionEvent)
}

/** Pauses `seam` just before its k-th call (1-based) until released. */
function pauseAt(seam: CrashSeam, k: number): { reached: Promise<void>; release: () => void } {
  let n = 0
  let reached!: () => void
  let release!: () => void
  const reachedP = new Promise<void>((r) => (reached = r))
  const released = new Promise<void>((r) => (release = r))
  seam.beforeCall = async () => {
    if (++n !== k) return
    reached()
    await released
  }
  return { reached: reachedP, release }
}

/** Records, at every change to the disk, the states a crash could leave and what must survive. */
class Recorder {
  readonly points: { images: CrashImage[]; expect: Expectation }[] = []
  readonly unexplored = noneUnexplored()
  constructor(
    readonly disk: CrashFileSystem,
    readonly models: Map<string, Model>,
    readonly maxImages: number,
  ) {}

  start(): void {
    this.disk.onMutation = () => this.point()
  }

  /**
   * Records the current state as a crash point. Called at every change to the disk, and after
   * every acknowledgement: a crash right after one leaves the state of the last change, but
   * what must survive has grown.
   */
  point(): void {
    const expect: Expectation = new Map([...this.models].map(([id, m]) => [id, { acked: m.acked.slice(), inflight: m.inflight.slice() }]))
    const { images, unexplored } = this.disk.crashStates({ maxImages: this.maxImages })
    addUnexplored(this.unexplored, unexplored)
    // A crash of the processes alone (no power cut) keeps everything: that state too.
    const current = this.disk.currentImage()
    if (!images.some((i) => i.key === current.key)) images.push(current)
    this.points.push({ images, expect })
  }

  stop(): void {
    this.disk.onMutation = undefined
  }
}

/** Checks recorded points, skipping (state, expectation) pairs already checked in this run. */
async function checkPoints(rec: Recorder, seen: Set<string>, result: TwoProcessResult, label: string): Promise<void> {
  result.crashPoints += rec.points.length
  addUnexplored(result.unexplored, rec.unexplored)
  for (const [i, point] of rec.points.entries()) {
    const expectKey = createHash('sha1').update(JSON.stringify([...point.expect])).digest('hex')
    for (const image of point.images) {
      const key = `${image.key}:${expectKey}`
      if (seen.has(key)) continue
      seen.add(key)
      result.states++
      const problem = await checkImage(image, point.expect, { root: ROOT, ageMs: STALE_MS + 1, staleLockMs: STALE_MS })
      if (problem) result.failedStates++
      if (problem && result.failures.length < 40) result.failures.push(`${label}, crash point ${i}: ${problem}`)
    }
  }
}

const open = (fs: CrashSeam) => createJsonlPersistence({ root: ROOT, fs, staleLockMs: STALE_MS })

/**
 * Shared directories: A and B each publish a new session, in the same bucket or in two
 * buckets of one root, with the root already durable or not yet created. A is paused before
 * each of its file-system calls in turn (after its mkdir of a directory, before the sync that
 * makes it durable, among others) while B publishes and acknowledges.
 */
async function sharedDirectories(
  variant: { rootExists: boolean; sameBucket: boolean },
  result: TwoProcessResult,
  options: { maxImagesPerPoint: number; maxSchedules: number },
): Promise<void> {
  const seen = new Set<string>()
  for (let k = 1; k <= options.maxSchedules; k++) {
    const disk = createCrashFileSystem()
    if (variant.rootExists) {
      await disk.mkdir(ROOT, 0o700)
      await disk.syncDir('/')
    }
    const sA = disk.seam()
    const sB = disk.seam()
    const pA = open(sA)
    const pB = open(sB)
    const models = new Map<string, Model>([
      ['a', { acked: [], inflight: [] }],
      ['b', { acked: [], inflight: [] }],
    ])
    const label = `shared directories (${variant.rootExists ? 'root durable' : 'root created by A'}, ${variant.sameBucket ? 'one bucket' : 'two buckets'}), A paused at call ${k}`
    let reachedK = false
    try {
      await pA.create({ id: 'a', cwd: '/proj', createdAt: T0, delegationDepth: 0 })
      await pB.create({ id: 'b', cwd: variant.sameBucket ? '/proj' : '/other', createdAt: T0, delegationDepth: 0 })
      const rec = new Recorder(disk, models, options.maxImagesPerPoint)
      rec.start()
      const gate = pauseAt(sA, k)
      const batchA = turn(0, 1, 2)
      const batchB = turn(0, 1, 3)
      models.get('a')!.inflight = batchA
      const appendA = pA.append('a', batchA).then(() => {
        models.set('a', { acked: batchA, inflight: [] })
        rec.point()
      })
      appendA.catch(() => {})
      reachedK = await Promise.race([gate.reached.then(() => true), appendA.then(() => false, () => false)])
      models.get('b')!.inflight = batchB
      await pB.append('b', batchB)
      models.set('b', { acked: batchB, inflight: [] })
      rec.point()
      gate.release()
      await appendA
      rec.stop()
      result.schedules++
      await checkPoints(rec, seen, result, label)
    } catch (err) {
      if (result.failures.length < 20) result.failures.push(`${label}: failed without a crash: ${String(err)}`)
    } finally {
      disk.onMutation = undefined
      sA.beforeCall = undefined
      await Promise.all([pA.closeAll(), pB.closeAll()]).catch(() => {})
    }
    if (!reachedK) return // A made fewer than k calls: every step has been covered
  }
  result.failures.push(`shared directories: more than ${options.maxSchedules} steps; raise maxSchedules`)
}

/**
 * Lock takeover interrupted at every step: A holds the lock of a session with an open turn and
 * dies; once its lock is stale, B and C both load the session. B is paused before each of its
 * file-system calls in turn while C loads; then B resumes. Exactly one of them must win the
 * lock, and at every change to the disk a power cut must leave a session that a fresh instance
 * loads, with every acknowledged event, once the crash is `staleLockMs` old.
 */
async function takeover(result: TwoProcessResult, options: { maxImagesPerPoint: number; maxSchedules: number }): Promise<void> {
  const seen = new Set<string>()
  for (let k = 1; k <= options.maxSchedules; k++) {
    const disk = createCrashFileSystem()
    const sA = disk.seam()
    const sB = disk.seam()
    const sC = disk.seam()
    const pA = open(sA)
    const pB = open(sB)
    const pC = open(sC)
    const label = `lock takeover, B paused at call ${k}`
    let reachedK = false
    const s: Model = { acked: [], inflight: [] }
    const models = new Map<string, Model>([['s', s]])
    try {
      await pA.create({ id: 's', cwd: '/proj', createdAt: T0, delegationDepth: 0 })
      const first = [...turn(0, 1, 1), ...turn(4, 2, 1, true)]
      await pA.append('s', first)
      s.acked = first
      sA.kill() // A dies holding the lock; its heartbeat never runs again
      disk.age(STALE_MS + 1)
      const rec = new Recorder(disk, models, options.maxImagesPerPoint)
      rec.start()
      const gate = pauseAt(sB, k)
      s.inflight = expectedClosers(s.acked, T0)
      const settle = (p: JsonlSessionPersistence) =>
        p.load('s').then(
          (loaded) => {
            // A load that resolves has made its repair durable: it is acknowledged.
            s.acked = [...loaded.events]
            s.inflight = []
            rec.point()
            return { ok: true as const }
          },
          (err: unknown) => ({ ok: false as const, err }),
        )
      const loadB = settle(pB)
      reachedK = await Promise.race([gate.reached.then(() => true), loadB.then(() => false)])
      const c = await settle(pC)
      gate.release()
      const b = await loadB
      const winners = [b, c].filter((r) => r.ok).length
      if (winners !== 1) {
        const why = [b, c].map((r) => (r.ok ? 'won' : isSessionPersistenceError(r.err) ? r.err.code : String(r.err))).join(', ')
        result.failures.push(`${label}: ${winners} of two contenders hold the lock (B, C: ${why})`)
      }
      for (const r of [b, c]) {
        if (!r.ok && !isSessionPersistenceError(r.err, 'E_LOCKED')) result.failures.push(`${label}: a contender failed with ${String(r.err)}`)
      }
      // The winner writes on; the loser must not be able to.
      const winner = b.ok ? pB : c.ok ? pC : undefined
      if (winner) {
        const next = turn(s.acked.length, 3, 1)
        s.inflight = next
        await winner.append('s', next)
        s.acked = [...s.acked, ...next]
        s.inflight = []
        rec.point()
      }
      rec.stop()
      result.schedules++
      await checkPoints(rec, seen, result, label)
    } catch (err) {
      if (result.failures.length < 20) result.failures.push(`${label}: failed without a crash: ${String(err)}`)
    } finally {
      disk.onMutation = undefined
      sB.beforeCall = undefined
      await Promise.all([pB.closeAll(), pC.closeAll()]).catch(() => {})
    }
    if (!reachedK) return
  }
  result.failures.push(`lock takeover: more than ${options.maxSchedules} steps; raise maxSchedules`)
}

/** Runs every two-process scenario at every pause point. */
export async function enumerateTwoProcessCrashes(options: { maxImagesPerPoint?: number; maxSchedules?: number } = {}): Promise<TwoProcessResult> {
  const opts = { maxImagesPerPoint: options.maxImagesPerPoint ?? 256, maxSchedules: options.maxSchedules ?? 200 }
  const result: TwoProcessResult = { schedules: 0, crashPoints: 0, states: 0, unexplored: noneUnexplored(), failedStates: 0, failures: [] }
  for (const rootExists of [true, false]) {
    for (const sameBucket of [true, false]) await sharedDirectories({ rootExists, sameBucket }, result, opts)
  }
  await takeover(result, opts)
  return result
}
