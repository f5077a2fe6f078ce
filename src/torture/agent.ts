// The torture's agent process: resumes (or starts) its sessions through the plugin, then runs
// turns with streamed chunks and tool calls, forks now and then, and after every acknowledged
// flush prints {"id","count","digest"} — until it is killed.
import { createJsonlPersistence, isSessionPersistenceError, type SessionEvent, sessionPersistencePlugin } from '../index.js'
import { createFaultInjectingFileSystem, createReferenceHost, type FsOp, type ReferenceSession } from '../testing/index.js'
import { HashChain } from './hash-chain.js'
import { seededRandom } from './random.js'

const [root, seedArg, mainId = 'main'] = process.argv.slice(2)
if (!root) throw new Error('usage: agent <root> [seed]')
const rand = seededRandom(Number(seedArg ?? Date.now()))

// TORTURE_SYNC=none shows that the checks have teeth: power cuts then lose acknowledged events.
const sync = process.env.TORTURE_SYNC === 'none' ? 'none' : 'data'
// TORTURE_STOP_IN_LOAD=n: the agent stops itself (SIGSTOP) just before the n-th file-system
// call of its start-up load and says so; the runner then kills it there. With
// TORTURE_STOP_IN_REPAIR=n it stops before the n-th call with which that load repairs the log
// (its cut, the closers' write, their syncs). Kills land at exact steps of the lock takeover
// and the repair, not only where the timing happens to put them.
const stopAt = Number(process.env.TORTURE_STOP_IN_LOAD ?? 0)
const stopInRepair = Number(process.env.TORTURE_STOP_IN_REPAIR ?? 0)
const REPAIR_OPS = new Set<FsOp>(['truncate', 'write', 'datasync', 'sync'])
const fs = createFaultInjectingFileSystem()
let loading = false
let loadCalls = 0
let repairCalls = 0
const ALL_OPS: FsOp[] = ['mkdir', 'open', 'link', 'unlink', 'readdir', 'stat', 'chmod', 'rename', 'utimes', 'readlink', 'syncDir', 'read', 'write', 'sync', 'datasync', 'truncate', 'fstat', 'fchmod', 'close']
if (stopAt > 0 || stopInRepair > 0) {
  fs.inject({
    op: ALL_OPS,
    before: (call) => {
      if (!loading) return
      loadCalls++
      if (REPAIR_OPS.has(call.op) && call.path.endsWith('.jsonl')) repairCalls++
      const here = stopAt > 0 ? loadCalls === stopAt : REPAIR_OPS.has(call.op) && call.path.endsWith('.jsonl') && repairCalls === stopInRepair
      if (!here) return
      process.stdout.write(`${JSON.stringify({ phase: 'stopped', id: mainId, op: call.op, path: call.path })}\n`)
      process.kill(process.pid, 'SIGSTOP')
    },
  })
}
// TORTURE_BIG_WRITE=n: after TORTURE_BIG_WRITE_AFTER acknowledgements (its resume's is the
// first) the agent appends one tool result of n bytes (several MiB), acknowledged on its own,
// and says {"phase":"big-write"} just before the file-system write of that batch; the runner
// kills it within a few milliseconds. Linux checks for a fatal
// signal between the pages of a buffered write(2), so a SIGKILL inside a write of several MiB
// leaves part of the line on disk: a torn tail for the next agent's load to cut. (A small write
// is completed whatever the kill: 200 kills of agents writing only small batches left no torn
// tail at all.)
const bigWrite = Number(process.env.TORTURE_BIG_WRITE ?? 0)
const bigWriteAfter = Number(process.env.TORTURE_BIG_WRITE_AFTER ?? 1)
let acks = 0
/** A write this long is the big batch's (the agents' other batches are far below 1 MiB). */
const BIG_WRITE_MIN = 1024 * 1024
if (bigWrite > 0) {
  fs.inject({
    op: 'write',
    path: (p) => p.endsWith('.jsonl'),
    before: (call) => {
      if (typeof call.detail === 'number' && call.detail >= BIG_WRITE_MIN) {
        process.stdout.write(`${JSON.stringify({ phase: 'big-write', id: mainId, bytes: call.detail })}\n`)
      }
    },
  })
}
const plugin = sessionPersistencePlugin({ persistence: createJsonlPersistence({ root, sync, fs }), flushDelayMs: 5 })
plugin.on('error', (e) => process.stderr.write(`agent error ${e.code}: ${e.message}\n`))
const host = createReferenceHost({ cwd: '/torture' })
await plugin.apply(host)

const chains = new Map<string, HashChain>()
const track = (s: ReferenceSession, prefix: readonly SessionEvent[] = []) => {
  chains.set(s.meta.id, HashChain.of([...prefix, ...s.events]))
  host.sessionEvents.on('session/event', (id, e) => {
    if (id === s.meta.id) chains.get(id)!.add(e)
  })
  return s
}
const acknowledge = async (s: ReferenceSession) => {
  await plugin.flush(s.meta.id)
  const chain = chains.get(s.meta.id)!
  process.stdout.write(`${JSON.stringify({ id: s.meta.id, count: chain.count, digest: chain.digest })}\n`)
  acks++
}

// The runner is told when a load (which repairs what the last kill left) starts and ends, so
// it can tell kills that landed inside one. Writes to a pipe are synchronous on Linux: the
// announcement is out before the load's first file-system call.
// The load's repair goes out with 'loaded': the runner checks that it cut the torn tail the
// kill before left (the one `inspect` saw), at the byte `inspect` said.
const phase = (p: 'load' | 'loaded', id: string, extra: { from?: 'start' | 'last-compaction'; firstSeq?: number; repair?: { persisted: boolean; truncatedAtByte?: number; droppedBytes: number } } = {}) =>
  process.stdout.write(`${JSON.stringify({ phase: p, id, ...extra })}\n`)

// Half the seeds resume from the last compaction (§15.1): the agent records compactions, and
// kills then land inside tail loads and their repairs too. TORTURE_FROM=start|last-compaction
// lets the runner choose (for the agents it stops inside a load, by the kills that landed so
// far, so both kinds of load and of repair are stopped whatever the timing gives); the coin is
// drawn either way, so a seed's turns stay the same.
const coin = rand() < 0.5
const fromTail = process.env.TORTURE_FROM === undefined ? coin : process.env.TORTURE_FROM === 'last-compaction'

async function resume(id: string): Promise<ReferenceSession> {
  try {
    const from = fromTail ? 'last-compaction' : 'start'
    phase('load', id, { from })
    loading = true
    const loaded = await plugin.persistence.load(id, { from })
    loading = false
    const r = loaded.repair
    const repair = r && { persisted: r.persisted, droppedBytes: r.droppedBytes, ...(r.truncatedAtByte !== undefined ? { truncatedAtByte: r.truncatedAtByte } : {}) }
    phase('loaded', id, { firstSeq: loaded.firstSeq, ...(repair ? { repair } : {}) })
    // The digest covers the whole log: what a tail load did not read is read (without a lock).
    const prefix = loaded.firstSeq > 0 ? (await plugin.persistence.read(id, { toSeq: loaded.firstSeq })).events : []
    return track(host.resume(loaded), prefix)
  } catch (err) {
    loading = false
    if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
    phase('loaded', id)
    return track(host.startSession({ id }))
  }
}

const main = await resume(mainId)
await acknowledge(main) // the repair (closers) is acknowledged too
let bigWritten = false
for (let n = 0; ; n++) {
  if (bigWrite > 0 && !bigWritten && acks >= bigWriteAfter) {
    bigWritten = true
    // The call is acknowledged first, so the big result is the first line of its batch: the tear
    // lands in it, right after an acknowledged line (a cut of one line too many loses that one).
    main.beginTurn('a big output')
    const [callId] = main.step({ text: 'reading the log', chunks: 1, toolCalls: [{ name: 'bash', arguments: { cmd: 'cat build.log' } }] })
    await acknowledge(main)
    main.toolResult(callId!, 'make: building target\n'.repeat(Math.ceil(bigWrite / 22)).slice(0, bigWrite))
    main.endStep()
    main.endTurn()
    await acknowledge(main)
  }
  const r = rand()
  // the reference host forks only a session it holds from seq 0
  if (r < 0.08 && main.firstSeq === 0 && main.events.some((e) => e.type === 'turn/end')) {
    const cut = main.events.map((e) => e.type).lastIndexOf('turn/end') + 1
    const child = track(host.fork(main, { seedLength: cut, id: `fork-${Date.now()}-${n}` }))
    child.runTurn({ user: 'forked', steps: [{ text: 'a branch', chunks: 2 }] })
    await acknowledge(child)
    child.dispose()
    continue
  }
  const calls = Math.floor(rand() * 3)
  main.beginTurn(`request ${n}`)
  const ids = main.step({ text: 'working on it '.repeat(1 + Math.floor(rand() * 40)), chunks: 1 + Math.floor(rand() * 6), toolCalls: Array.from({ length: calls }, () => ({ name: 'bash', arguments: { cmd: 'make test' } })) })
  if (rand() < 0.5) await acknowledge(main) // a durability point with calls in flight
  for (const id of ids) main.toolResult(id, 'ok '.repeat(Math.floor(rand() * 2000)))
  main.endStep()
  main.endTurn()
  if (rand() < 0.15) {
    // a compaction keeping the last turn, then the request header again (so a tail load is short)
    const keep = main.events.map((e) => e.type).lastIndexOf('turn/start')
    main.emit('history/compact', { summary: `summary before ${n}`, firstKeptSeq: main.firstSeq + Math.max(0, keep) })
    main.requestHeader({ model: 'torture', turn: n }, 'change')
  }
  await acknowledge(main)
}
