import { appendFile, open, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { meta } from './helpers/events.js'
import { startCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { observedFs } from './helpers/observed-fs.js'

// A watch judges a line as `load` and `read` judge it (§15.3, §16): damage — a complete line that
// fails its checksum in a version-1 log, or a defect before the commit boundary — rejects the
// watch with the same E_CORRUPT, where it used to wait there forever in silence (no repair ever
// writes over damage: a live viewer showed nothing and said nothing, while PostgreSQL's rejects).
// A torn tail, which a writer's repair cuts and closes, is still waited at.

const msg = (seq: number): SessionEvent => ({ seq, type: 'user/message', time: 1, data: { text: `hello ${seq}` } })
const turnEnd = (seq: number): SessionEvent => ({ seq, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } })

async function logPath(root: string, id: string): Promise<string> {
  const bucket = (await readdir(root)).find((d) => !d.startsWith('.'))!
  return join(root, bucket, `${id}.jsonl`)
}

/** A log written by the package under a fresh root: the root and the log's path. */
async function writtenLog(id: string, events: SessionEvent[], formatVersion?: 0 | 1): Promise<{ root: string; file: string }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, ...(formatVersion === undefined ? {} : { formatVersion }) })
  await p.create(meta(id))
  await p.append(id, events)
  await p.closeAll()
  return { root, file: await logPath(root, id) }
}

/** What a watch from `fromSeq` yields before it ends, rejects, or `ms` pass (then aborted). */
async function watchFor(root: string, id: string, ms: number, fromSeq = 0, onEvent?: (e: SessionEvent) => Promise<void> | void) {
  const stop = new AbortController()
  const timer = setTimeout(() => stop.abort(), ms)
  const seqs: number[] = []
  try {
    for await (const e of createJsonlPersistence({ root }).watch(id, { fromSeq, signal: stop.signal })) {
      seqs.push(e.seq)
      await onEvent?.(e)
    }
    return { seqs, error: undefined, aborted: stop.signal.aborted }
  } catch (error) {
    return { seqs, error: error as { code?: string; line?: number; byteOffset?: number }, aborted: stop.signal.aborted }
  } finally {
    clearTimeout(timer)
  }
}

async function loadError(root: string, id: string) {
  return createJsonlPersistence({ root }).load(id).then(
    () => undefined,
    (e: { code?: string; line?: number; byteOffset?: number }) => ({ code: e.code, line: e.line, byteOffset: e.byteOffset }),
  )
}

test('version 1: a committed line that fails its checksum rejects the watch with the E_CORRUPT load gives, after the events before it', async () => {
  const { root, file } = await writtenLog('w', [msg(0), msg(1), msg(2), msg(3), turnEnd(4)])
  const text = await readFile(file, 'utf8')
  await writeFile(file, text.replace('hello 2', 'hellO 2'))
  const loaded = await loadError(root, 'w')
  expect(loaded).toMatchObject({ code: 'E_CORRUPT', line: 4 })
  for (const fromSeq of [0, 2]) {
    const r = await watchFor(root, 'w', 3000, fromSeq)
    expect(r.aborted).toBe(false)
    expect(r.seqs).toEqual([0, 1].filter((s) => s >= fromSeq))
    expect({ code: r.error?.code, line: r.error?.line, byteOffset: r.error?.byteOffset }).toEqual(loaded)
  }
}, 20_000)

test('version 1: a damaged line appended while a watch waits at the end rejects it (E_CORRUPT), after every valid event', async () => {
  const { root, file } = await writtenLog('w', [msg(0), msg(1)])
  // A line as the writer seals it, one character changed after sealing: complete, no NUL.
  const lines = (await readFile(file, 'utf8')).split('\n')
  const damaged = lines[2]!.replace('"seq":1', '"seq":2').replace('hello 1', 'hello 2')
  const r = await watchFor(root, 'w', 5000, 0, async (e) => {
    if (e.seq === 1) await appendFile(file, `${damaged}\n`)
  })
  expect(r.seqs).toEqual([0, 1])
  expect(r.aborted).toBe(false)
  expect(r.error?.code).toBe('E_CORRUPT')
  expect(r.error?.line).toBe(4)
  expect(await loadError(root, 'w')).toMatchObject({ code: 'E_CORRUPT', line: 4 })
}, 20_000)

test('version 1: a torn tail is waited at, and the watch goes on with the closers a load writes there', async () => {
  const { root, file } = await writtenLog('w', [msg(0), { seq: 1, type: 'turn/start', time: 1, data: { turn: 1 } }])
  await appendFile(file, '{"seq":2,"type":"user/mess') // a crash's torn last line: no \n
  let repaired = false
  const r = await watchFor(root, 'w', 5000, 0, async (e) => {
    if (e.seq === 1 && !repaired) {
      repaired = true
      await new Promise((ok) => setTimeout(ok, 200)) // the watch has met the torn tail
      const q = createJsonlPersistence({ root })
      await q.load('w') // cuts the torn tail, closes the turn
      await q.closeAll()
    }
    if (e.type === 'turn/end') throw Object.assign(new Error('done'), { code: 'DONE' })
  })
  expect(r.error?.code).toBe('DONE')
  expect(r.seqs).toEqual([0, 1, 2])
}, 20_000)

test('version 0: a defect before the commit boundary rejects the watch as load does; one after it (a torn tail there) is waited at', async () => {
  const { root, file } = await writtenLog('v', [msg(0), msg(1), msg(2), turnEnd(3)], 0)
  const good = await readFile(file, 'utf8')
  // Line 3 (seq 1) no JSON, a turn/end after it: committed damage.
  await writeFile(file, good.replace('{"seq":1,', '{"seq":1,,'))
  const loaded = await loadError(root, 'v')
  expect(loaded).toMatchObject({ code: 'E_CORRUPT', line: 3 })
  const r = await watchFor(root, 'v', 3000)
  expect(r.aborted).toBe(false)
  expect(r.seqs).toEqual([0])
  expect({ code: r.error?.code, line: r.error?.line, byteOffset: r.error?.byteOffset }).toEqual(loaded)
  // After the last turn/end, a line that is no JSON is what load cuts as a torn tail: waited at.
  await writeFile(file, `${good}{"seq":4,,"type":"x"}\n`)
  const waited = await watchFor(root, 'v', 1500)
  expect(waited).toEqual({ seqs: [0, 1, 2, 3], error: undefined, aborted: true })
  expect(await loadError(root, 'v')).toBeUndefined()
}, 20_000)

test('tail -f meeting a damaged line appended while it follows: E_CORRUPT naming the line on stderr, exit 1 (it waited there in silence)', async () => {
  const { root, file } = await writtenLog('t', [msg(0), msg(1)])
  const lines = (await readFile(file, 'utf8')).split('\n')
  const tail = startCli(['--root', root, 'tail', 't', '-n', '2', '-f', '--json'])
  try {
    expect(await tail.waitForLines(2)).toEqual([msg(0), msg(1)].map((e) => JSON.stringify(e)))
    await appendFile(file, `${lines[2]!.replace('"seq":1', '"seq":2')}\n`) // the seal of seq 1's line
    const { code } = await tail.exit()
    expect(code).toBe(1)
    expect(tail.stderr()).toMatch(/^session-jsonl: E_CORRUPT: .*line 4 \(byte \d+\): checksum mismatch; stopped following\n$/)
    expect(tail.lines).toHaveLength(2)
  } finally {
    tail.child.kill('SIGKILL')
  }
}, 20_000)

// A refusal where the event before it is still in place is the bytes' own: a duplicated or blank
// line is judged, never stepped over by a search by seq that lands on a later line with that seq.
for (const formatVersion of [0, 1] as const) {
  test(`version ${formatVersion}: a duplicated committed line rejects the watch as load does (it was stepped over: the watch yielded all and no error)`, async () => {
    const { root, file } = await writtenLog('d', [msg(0), msg(1), msg(2), turnEnd(3)], formatVersion)
    const lines = (await readFile(file, 'utf8')).split('\n')
    lines.splice(3, 0, lines[2]!) // seq 1's line twice
    await writeFile(file, lines.join('\n'))
    const loaded = await loadError(root, 'd')
    expect(loaded).toMatchObject({ code: 'E_CORRUPT', line: 4 })
    const r = await watchFor(root, 'd', 3000)
    expect(r.seqs).toEqual([0, 1])
    expect(r.aborted).toBe(false)
    expect({ code: r.error?.code, line: r.error?.line, byteOffset: r.error?.byteOffset }).toEqual(loaded)
  }, 20_000)

  test(`version ${formatVersion}: a duplicate of the last line and a next one: never yields that next one (load cuts both), goes on with the closers`, async () => {
    // Long enough (~60 KiB) that a search by seq bisects, rather than reading on from the header.
    const N = 600
    const { root, file } = await writtenLog('t', [{ seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } }, ...Array.from({ length: N - 1 }, (_, i) => msg(i + 1))], formatVersion)
    const lines = (await readFile(file, 'utf8')).split('\n')
    const last = lines[N]! // seq N - 1's line
    const next = last.replace(`"seq":${N - 1}`, `"seq":${N}`).replace(`hello ${N - 1}`, 'PHANTOM')
    const phantom = formatVersion === 0 ? next : resealed(next)
    await appendFile(file, `${last}\n${phantom}\n`)
    let repaired = false
    const r = await watchFor(root, 't', 5000, 0, async (e) => {
      if (e.seq === N - 1 && !repaired) {
        repaired = true
        await new Promise((ok) => setTimeout(ok, 300)) // the watch has met the duplicate
        const q = createJsonlPersistence({ root, formatVersion })
        const loaded = await q.load('t') // cuts both, closes the turn
        expect(loaded.repair?.droppedLines).toBe(2)
        await q.closeAll()
      }
      if (e.type === 'turn/end') throw Object.assign(new Error('done'), { code: 'DONE' })
    })
    expect(r.error?.code).toBe('DONE')
    expect(r.seqs).toEqual(Array.from({ length: N + 1 }, (_, i) => i)) // seq N: the closer, never the phantom
  }, 20_000)
}

test('version 1: a blank line, then a valid line, appended while a watch waits at the end: E_CORRUPT as load gives, the valid line never yielded', async () => {
  const { root, file } = await writtenLog('b', [msg(0), msg(1)])
  const sealed = (await readFile(file, 'utf8')).split('\n')[3]!
  const after = resealed(sealed.replace('"seq":1', '"seq":2').replace('hello 1', 'AFTER BLANK'))
  const r2 = watchFor(root, 'b', 5000, 2) // waits at the end (nothing from seq 2 yet)
  await new Promise((ok) => setTimeout(ok, 300))
  await appendFile(file, `\n${after}\n`)
  const got = await r2
  expect(got.seqs).toEqual([])
  expect(got.aborted).toBe(false)
  const loaded = await loadError(root, 'b')
  expect(loaded).toMatchObject({ code: 'E_CORRUPT', line: 4 })
  expect({ code: got.error?.code, line: got.error?.line, byteOffset: got.error?.byteOffset }).toEqual(loaded)
}, 20_000)

/** A version-1 line with its checksum made again for the text before it (as the writer seals). */
function resealed(line: string): string {
  const body = line.replace(/,"crc":"[0-9a-f]{8}"\}$/, '')
  return `${body},"crc":"${crc32(Buffer.from(body, 'utf8')).toString(16).padStart(8, '0')}"}`
}

test('version 0: a torn tail with MiB of uncommitted lines behind it is judged once, not read again at every touch of the file', async () => {
  const { root, file } = await writtenLog('v', [msg(0), turnEnd(1)], 0)
  // A crash's NUL bytes after the commit boundary, then 4 MiB of lines without a turn/end: all cut by a load.
  const lines = Array.from({ length: 1000 }, () => JSON.stringify({ seq: 9, type: 'user/message', time: 1, data: { text: 'q'.repeat(4000) } }))
  await appendFile(file, `\0\0\0\0\n${lines.join('\n')}\n`)
  let read = 0
  const fs = observedFs({ onRead: (path, _at, _len, got) => { if (path === file) read += got } })
  const stop = new AbortController()
  const seqs: number[] = []
  const watching = (async () => {
    for await (const e of createJsonlPersistence({ root, fs }).watch('v', { signal: stop.signal })) seqs.push(e.seq)
  })()
  for (let i = 0; i < 300 && read < 4_000_000; i++) await new Promise((r) => setTimeout(r, 10)) // judged once: read to the end
  await new Promise((r) => setTimeout(r, 200))
  const afterFirst = read
  expect(afterFirst).toBeGreaterThan(4_000_000)
  for (let i = 1; i <= 3; i++) {
    await utimes(file, new Date(), new Date(Date.now() + i * 1000)) // the mtime moves, nothing else
    await new Promise((r) => setTimeout(r, 1300)) // a notification and a safety poll
  }
  stop.abort()
  await watching
  expect(seqs).toEqual([0, 1])
  expect(read - afterFirst).toBeLessThan(1 << 20) // it read 3 × 4 MiB again
}, 30_000)

test('version 0: after a torn tail was judged, lines rewritten in place to the same size are found again by seq (the verdict kept for that size skipped the check)', async () => {
  const m = (seq: number, text: string): SessionEvent => ({ seq, type: 'user/message', time: 1, data: { text } })
  const { root, file } = await writtenLog('w', [0, 1, 2, 3, 4].map((seq) => m(seq, 'a'.repeat(60))), 0)
  const stop = new AbortController()
  const seen: string[] = []
  const watching = (async () => {
    for await (const e of createJsonlPersistence({ root }).watch('w', { signal: stop.signal })) seen.push(`${e.seq}:${(e.data as { text: string }).text.slice(0, 1)}`)
  })()
  const until = async (ok: () => boolean) => {
    for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10))
  }
  await until(() => seen.length === 5)
  await appendFile(file, `${'\0'.repeat(19)}\n`) // a crash's NUL bytes: a torn tail, judged and waited at
  await new Promise((r) => setTimeout(r, 1300))
  // A writer rolls back seqs 3 and 4 (and the torn bytes) and writes 3', 4', 5' in their place, to the same size.
  const size = (await stat(file)).size
  const at3 = (await readFile(file, 'utf8')).indexOf('{"seq":3,')
  const lines = (pad: string) => [m(3, 'b'), m(4, `b${pad}`), m(5, 'b')].map((e) => `${JSON.stringify(e)}\n`).join('')
  const rewritten = lines('b'.repeat(size - at3 - lines('').length))
  const h = await open(file, 'r+')
  await h.write(rewritten, at3)
  await h.close()
  expect((await stat(file)).size).toBe(size)
  await until(() => seen.length === 6)
  stop.abort()
  await watching
  expect(seen).toEqual(['0:a', '1:a', '2:a', '3:a', '4:a', '5:b'])
}, 20_000)
