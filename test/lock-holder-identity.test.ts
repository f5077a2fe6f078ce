import { type ChildProcess, spawn } from 'node:child_process'
import { mkdir, readFile, readlink, readdir, utimes, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { hasExited, parseStartTime } from '../src/jsonl/lock/process-identity.js'
import { meta, turn } from './helpers/events.js'
import { rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

const linux = process.platform === 'linux'
const children: ChildProcess[] = []

afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL')
})

async function startTimeOf(pid: number): Promise<string> {
  const t = parseStartTime(await readFile(`/proc/${pid}/stat`, 'utf8'))
  if (t === undefined) throw new Error(`no start time for ${pid}`)
  return t
}

/** A lock naming `pid` as written on this host, boot and pid namespace, refreshed an hour ago. */
async function plantLock(root: string, id: string, pid: number, startTime: string) {
  const lock = join(root, '.locks', `${id}.lock`)
  await mkdir(join(root, '.locks'), { recursive: true })
  const owner = {
    pid,
    startTime,
    host: hostname(),
    bootId: (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(),
    pidNs: await readlink('/proc/self/ns/pid'),
    since: Date.now() - 3_600_000,
    staleLockMs: 1000,
    token: `planted-${pid}`,
  }
  await writeFile(lock, JSON.stringify(owner))
  const old = new Date(Date.now() - 3_600_000)
  await utimes(lock, old, old)
  return lock
}

async function seeded(root: string, id: string) {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, turn(0, 1))
  await p.closeAll()
}

function liveChild(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', 'process.stdout.write("up\\n"); setInterval(() => {}, 1000)'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child))
    child.once('error', reject)
  })
}

describe('the start time in /proc/<pid>/stat', () => {
  test('is field 22, counted after the last parenthesis (the command name may hold spaces and parentheses)', () => {
    // After the name: field 3 is the state, field 4 the parent pid… field 22 the start time.
    const rest = 'S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21'
    expect(parseStartTime(`42 (node) ${rest}`)).toBe('987654')
    expect(parseStartTime(`42 (a) b (c) d) ${rest}`)).toBe('987654')
    expect(parseStartTime(`42 ( ) ) ${rest}`)).toBe('987654')
    expect(parseStartTime('42 (node) S 1 2')).toBeUndefined()
    expect(parseStartTime('garbage')).toBeUndefined()
  })

  test('a zombie (exited, not yet reaped) counts as exited; running and sleeping ones do not', () => {
    // Fields 4… of /proc/<pid>/stat; field 20 (num_threads) is 1, field 22 the start time.
    const rest = '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1 18 987654 20 21'
    expect(hasExited(`42 (a) Z) Z ${rest}`)).toBe(true)
    expect(hasExited(`42 (x) X ${rest}`)).toBe(true)
    expect(hasExited(`42 (Z) S ${rest}`)).toBe(false)
    expect(hasExited(`42 (node) R ${rest}`)).toBe(false)
  })

  test('regression: a zombie leader whose other threads still run (a SIGKILLed writer whose thread-pool write is landing) has not exited yet', () => {
    // The leader of a killed process can be a zombie while its other threads finish the system
    // call they were in (a pwrite of the log): field 20 counts them. Taken for dead, its lock was
    // taken over while that write could still land.
    const threads = (n: number) => `1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 ${n} 18 987654 20 21`
    expect(hasExited(`42 (node) Z ${threads(5)}`)).toBe(false)
    expect(hasExited(`42 (node) Z ${threads(2)}`)).toBe(false)
    expect(hasExited(`42 (node) Z ${threads(1)}`)).toBe(true)
    expect(hasExited(`42 (node) Z ${threads(0)}`)).toBe(true)
    expect(hasExited('42 (node) Z')).toBe(true) // a line too short to say: as before
  })

  test.skipIf(!linux)('of this process matches what the lock it takes records', async () => {
    const root = await tmpRoot()
    await seeded(root, 'mine')
    const p = createJsonlPersistence({ root })
    await p.load('mine')
    const owner = JSON.parse(await readFile(join(root, '.locks', 'mine.lock'), 'utf8'))
    expect(owner.pid).toBe(process.pid)
    expect(owner.startTime).toBe(await startTimeOf(process.pid))
    await p.closeAll()
  })
})

describe.skipIf(!linux)('a holder on this host is alive exactly when its pid and start time exist', () => {
  test('a live holder is never taken over, however old its lock; once dead it is taken over at once', async () => {
    const root = await tmpRoot()
    await seeded(root, 'alive')
    const child = await liveChild()
    const lock = await plantLock(root, 'alive', child.pid!, await startTimeOf(child.pid!))
    const p = createJsonlPersistence({ root, staleLockMs: 1000 })
    const err = await rejection(p.load('alive'))
    expect(err.code).toBe('E_LOCKED')
    expect(err.message).toContain(`pid ${child.pid} on host ${hostname()}`)
    expect(JSON.parse(await readFile(lock, 'utf8')).pid).toBe(child.pid) // untouched
    const exited = new Promise((r) => child.once('exit', r))
    child.kill('SIGKILL')
    await exited
    expect((await p.load('alive')).events).toHaveLength(4)
    expect(JSON.parse(await readFile(lock, 'utf8')).pid).toBe(process.pid)
    await p.closeAll()
  })

  test('regression: a holder that exited and waits to be reaped (a zombie) is dead: taken over at once, not after staleLockMs', async () => {
    const root = await tmpRoot()
    await seeded(root, 'zombie')
    // The background `sleep 0.5` exits after its parent has exec'd into `sleep 30`, which never
    // reaps it. (An immediate exit could be reaped by the shell itself before its exec.)
    const parent = spawn('sh', ['-c', 'sleep 0.5 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'inherit'] })
    children.push(parent)
    const pid = Number(await new Promise<string>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()))))
    let stat = ''
    for (let i = 0; i < 500 && !hasExited(stat); i++) {
      stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch((err: NodeJS.ErrnoException) => {
        throw new Error(`the rig lost its zombie: /proc/${pid}/stat ${err.code} (reaped by someone)`)
      })
      if (!hasExited(stat)) await new Promise((r) => setTimeout(r, 10))
    }
    expect(hasExited(stat)).toBe(true) // the rig: a zombie, whose pid still answers a signal
    expect(() => process.kill(pid, 0)).not.toThrow()
    const lock = await plantLock(root, 'zombie', pid, parseStartTime(stat)!)
    // A fresh heartbeat and a long staleLockMs: only seeing that the holder has exited can free it.
    const now = new Date()
    await utimes(lock, now, now)
    const p = createJsonlPersistence({ root, staleLockMs: 60_000 })
    expect((await p.load('zombie')).events).toHaveLength(4)
    expect(JSON.parse(await readFile(lock, 'utf8')).pid).toBe(process.pid)
    await p.closeAll()
  })

  test('a lock naming a live pid with another start time (a reused pid) is taken over at once', async () => {
    const root = await tmpRoot()
    await seeded(root, 'reused')
    const real = await startTimeOf(process.pid)
    const lock = await plantLock(root, 'reused', process.pid, String(Number(real) + 1))
    // Fresh heartbeat and a long staleLockMs: only the start time can tell it is not the holder.
    const now = new Date()
    await utimes(lock, now, now)
    const p = createJsonlPersistence({ root })
    expect((await p.load('reused')).events).toHaveLength(4)
    const owner = JSON.parse(await readFile(lock, 'utf8'))
    expect(owner.startTime).toBe(real)
    expect(owner.token).not.toBe(`planted-${process.pid}`)
    await p.closeAll()
    expect(await readdir(join(root, '.locks'))).toEqual([])
  })

  test('a lock of another instance in this very process is alive: E_LOCKED, even with an ancient mtime', async () => {
    const root = await tmpRoot()
    await seeded(root, 'sibling')
    const a = createJsonlPersistence({ root, staleLockMs: 1000 })
    await a.load('sibling')
    const old = new Date(Date.now() - 3_600_000)
    await utimes(join(root, '.locks', 'sibling.lock'), old, old)
    const b = createJsonlPersistence({ root, staleLockMs: 1000 })
    expect((await rejection(b.load('sibling'))).code).toBe('E_LOCKED')
    await a.closeAll()
    expect((await b.load('sibling')).events).toHaveLength(4)
    await b.closeAll()
  })
})
