import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type LoadedSession, type SessionEvent } from '../src/index.js'
import { checkLog } from '../src/jsonl/check-log.js'
import { ev, meta, turn } from './helpers/events.js'
import { HEADER, line, writeRawLog } from './helpers/raw-log.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { turnStep } from './helpers/turn-arbitraries.js'

// `verify` says of each log what `inspect` would say (ok, repairable with the cut and the closers
// a load would make, corrupt at a line and byte, unsupported), though it reads each log in a
// pass that keeps no event (src/jsonl/check-log.ts). The oracle below is the verdict `verify`
// built from `inspect` before: the CLI's verdicts must be exactly those, in JSON and in text.

type Verdict = Record<string, unknown>

/** The verdict of `id` as verify built it from `inspect` (the code before check-log.ts). */
async function inspectVerdict(root: string, id: string): Promise<Verdict> {
  const p = createJsonlPersistence({ root })
  const path = (await p.list({ onProblem: () => {} })).find((l) => l.meta.id === id)!.location
  const where = path.kind === 'jsonl' ? path.path : ''
  let s: LoadedSession
  try {
    s = await p.inspect(id)
  } catch (err) {
    const c = err as { code: string; message: string; line?: number; byteOffset?: number; reason?: string }
    if (c.code === 'E_FORMAT_UNSUPPORTED') return { status: 'unsupported', id, path: where, reason: c.message }
    return { status: 'corrupt', id, path: where, ...(c.line !== undefined ? { line: c.line, byteOffset: c.byteOffset } : {}), reason: c.reason ?? `${c.code}: ${c.message}` }
  }
  const r = s.repair
  if (!r) return { status: 'ok', id, path: where, events: s.events.length }
  return {
    status: 'repairable',
    id,
    path: where,
    events: s.events.length - r.closers.length,
    cutBytes: r.droppedBytes,
    cutLines: r.droppedLines,
    ...(r.truncatedAtByte !== undefined ? { truncateAt: r.truncatedAtByte } : {}),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    closers: r.closers.length,
    droppedTurnEnds: r.droppedTurnEnds,
  }
}

const TORN = '{"seq":2,"type":"tool/res'

/** A root with a log of every kind of verdict; returns the ids listed (a version-2 header is not). */
async function fleet(root: string): Promise<string[]> {
  for (const version of [0, 1] as const) {
    const p = createJsonlPersistence({ root, formatVersion: version })
    await p.create(meta(`ok-v${version}`, { cwd: '/proj/a' }))
    await p.append(`ok-v${version}`, [...turn(0, 1), ...turn(4, 2)])
    await p.create(meta(`torn-v${version}`))
    await p.append(`torn-v${version}`, [ev(0, 'turn/start', { turn: 1 }), ev(1, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'x9', name: 'grep', arguments: {} }] })])
    await p.create(meta(`crc-v${version}`))
    await p.append(`crc-v${version}`, [...turn(0, 1), ...turn(4, 2)])
    await p.closeAll()
    await writeFile(p.locate(meta(`torn-v${version}`)).path, TORN, { flag: 'a' })
    // One changed byte in a committed line: a checksum mismatch in version 1, another history in version 0.
    const crcPath = p.locate(meta(`crc-v${version}`)).path
    await writeFile(crcPath, (await readFile(crcPath, 'utf8')).replace('question 1', 'question 7'))
  }
  // An open turn and no torn tail: nothing to cut, three closers (the call's result, the step's end, the turn's end).
  await writeRawLog(root, 'open', HEADER('open') + [...turn(0, 1), ev(4, 'turn/start', { turn: 2 }), ev(5, 'step/start', { turn: 2, step: 0 }), ev(6, 'tool/call', { turn: 2, step: 0, callId: 'k' })].map(line).join(''))
  // Zeroed blocks (never synced) with a committed turn end after them: cut, and the turn end counted as lost.
  await writeRawLog(root, 'zeroed', `${HEADER('zeroed')}${line(ev(0, 'turn/start', { turn: 1 }))}${line(ev(1, 'turn/end', { turn: 1 }))}${line(ev(2, 'turn/start', { turn: 2 }))}${'\0'.repeat(64)}\n${line(ev(4, 'turn/end', { turn: 2 }))}`)
  // Damage in the middle of the file, before a committed turn end.
  await writeRawLog(root, 'broken', `${HEADER('broken')}{"seq":0,"type":"turn/start","time":1}\ngarbage\n{"seq":2,"type":"turn/end","time":2}\n`)
  // Version 1: zeroed blocks, then a complete line whose checksum fails: refused at that line.
  const p1 = createJsonlPersistence({ root, formatVersion: 1 })
  await p1.create(meta('damage-after-v1'))
  await p1.append('damage-after-v1', turn(0, 1))
  await p1.closeAll()
  const later = (await readFile(p1.locate(meta('crc-v1')).path, 'utf8')).split('\n')[6]! // a sealed line of another log: its checksum holds
  await writeFile(p1.locate(meta('damage-after-v1')).path, `${'\0'.repeat(32)}\n${later.replace('question', 'questioN')}\n`, { flag: 'a' })
  // The same id in two buckets.
  await writeRawLog(root, 'twice', `${HEADER('twice')}${line(ev(0, 'turn/start', { turn: 1 }))}`)
  await mkdir(join(root, 'other-bucket'), { recursive: true })
  await writeFile(join(root, 'other-bucket', 'twice.jsonl'), `${HEADER('twice')}${line(ev(0, 'turn/start', { turn: 1 }))}`)
  // A header only; and a version this package does not read.
  await writeRawLog(root, 'empty', HEADER('empty'))
  await writeRawLog(root, 'future', '{"type":"session","version":2,"id":"future","createdAt":5,"delegationDepth":0}\n')
  return ['ok-v0', 'ok-v1', 'torn-v0', 'torn-v1', 'crc-v0', 'crc-v1', 'open', 'zeroed', 'broken', 'damage-after-v1', 'twice', 'empty']
}

describe('session-jsonl verify: the verdicts inspect gives', () => {
  test('ok, repairable (torn tail, open turn, zeroed blocks), corrupt (mid-file damage, checksum mismatch, damage after a defect, an id twice) and unsupported, in JSON and in text', async () => {
    const root = await tmpRoot()
    const ids = await fleet(root)
    const r = await runCli(['--root', root, 'verify', '--json'])
    expect(r.code, r.stderr).toBe(1)
    const report = JSON.parse(r.stdout) as { summary: Record<string, number>; logs: Verdict[] }
    const byName = new Map(report.logs.filter((v) => v.id !== 'twice').map((v) => [(v.id as string | undefined) ?? (v.path as string).split('/').pop()!, v]))

    // Every listed log's verdict is exactly inspect's.
    for (const id of ids) if (id !== 'twice') expect(byName.get(id), id).toEqual(await inspectVerdict(root, id))
    // An id in two buckets is listed twice; inspect of it is refused, so each is corrupt.
    const twice = await inspectVerdict(root, 'twice')
    expect(report.logs.filter((v) => v.id === 'twice')).toEqual(['_no-cwd', 'other-bucket'].map((b) => ({ ...twice, path: join(root, b, 'twice.jsonl') })))
    expect(twice.reason).toMatch(/^E_AMBIGUOUS: /)
    expect(Object.fromEntries([...byName].map(([k, v]) => [k, v.status]))).toEqual({
      'ok-v0': 'ok',
      'ok-v1': 'ok',
      'torn-v0': 'repairable',
      'torn-v1': 'repairable',
      'crc-v0': 'ok', // version 0 has no checksums: the changed byte is another history
      'crc-v1': 'corrupt',
      open: 'repairable',
      zeroed: 'repairable',
      broken: 'corrupt',
      'damage-after-v1': 'corrupt',
      empty: 'ok',
      'future.jsonl': 'unsupported',
    })
    expect(report.summary).toEqual({ logs: 14, ok: 4, repairable: 4, corrupt: 5, unsupported: 1, tempFiles: 0 })

    // What each says, written out.
    const torn = (byName.get('torn-v0')!.truncateAt as number) + TORN.length
    expect(byName.get('torn-v0')).toMatchObject({ events: 2, cutBytes: TORN.length, cutLines: 1, truncateAt: torn - TORN.length, reason: 'torn tail: the last line has no newline', closers: 2, droppedTurnEnds: 0 })
    expect(byName.get('torn-v1')).toMatchObject({ events: 2, cutBytes: TORN.length, cutLines: 1, reason: 'torn tail: the last line has no newline', closers: 2, droppedTurnEnds: 0 })
    expect(byName.get('open')).toEqual({ status: 'repairable', id: 'open', path: join(root, '_no-cwd', 'open.jsonl'), events: 7, cutBytes: 0, cutLines: 0, closers: 3, droppedTurnEnds: 0 })
    expect(byName.get('zeroed')).toMatchObject({ events: 3, cutLines: 2, closers: 1, droppedTurnEnds: 1 })
    expect(byName.get('zeroed')!.reason).toMatch(/^NUL bytes \(blocks never synced before a crash\)/)
    expect(byName.get('ok-v0')).toEqual({ status: 'ok', id: 'ok-v0', path: expect.stringMatching(/ok-v0\.jsonl$/), events: 8 })
    expect(byName.get('empty')).toMatchObject({ status: 'ok', events: 0 })
    const brokenAt = HEADER('broken').length + '{"seq":0,"type":"turn/start","time":1}\n'.length
    expect(byName.get('broken')).toMatchObject({ line: 3, byteOffset: brokenAt })
    expect(byName.get('crc-v1')).toMatchObject({ line: 3, reason: expect.stringMatching(/checksum mismatch/) })
    expect(byName.get('damage-after-v1')).toMatchObject({ line: 7, reason: expect.stringMatching(/checksum mismatch/) })
    expect(byName.get('future.jsonl')!.reason).toMatch(/version 2/)

    const text = await runCli(['--root', root, 'verify'])
    expect(text.code).toBe(1)
    const lines = text.stdout.split('\n')
    expect(lines).toContain(`ok           ok-v1 (8 events)`)
    expect(lines).toContain(`repairable   torn-v0: would cut ${TORN.length} bytes in 1 line(s) at byte ${torn - TORN.length} (torn tail: the last line has no newline); would write 2 closing event(s)`)
    expect(lines).toContain('repairable   open: nothing to cut; would write 3 closing event(s)')
    expect(lines.find((l) => l.startsWith('repairable   zeroed: '))).toMatch(/; would write 1 closing event\(s\); 1 committed turn end\(s\) lost to zeroed blocks$/)
    expect(lines).toContain(`corrupt      broken: ${join(root, '_no-cwd', 'broken.jsonl')} line 3, byte ${brokenAt}: not JSON: ${(byName.get('broken')!.reason as string).slice('not JSON: '.length)}`)
    expect(lines.find((l) => l.startsWith('unsupported  '))).toMatch(/future\.jsonl/)
    expect(lines.at(-2)).toBe('14 log(s): 4 ok, 4 repairable, 5 corrupt, 1 unsupported')
  })

  test('a log whose header cannot be listed is named by its path once in text, its reason kept whole in JSON', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    const m = meta('hdr')
    await p.create(m)
    await p.append('hdr', turn(0, 1))
    await p.closeAll()
    const path = p.locate(m).path
    const bytes = await readFile(path, 'utf8')
    await writeFile(path, bytes.replace('"delegationDepth":0', '"delegationDepth":7')) // the header's checksum no longer matches
    const json = JSON.parse((await runCli(['--root', root, 'verify', '--json'])).stdout) as { logs: Verdict[] }
    expect(json.logs).toEqual([{ status: 'corrupt', path, reason: `corrupt session log ${path}: line 1 (byte 0): checksum mismatch in the header` }])
    const text = await runCli(['--root', root, 'verify'])
    expect(text.code).toBe(1)
    expect(text.stdout).toBe(`corrupt      ${path}: line 1 (byte 0): checksum mismatch in the header\n1 log(s): 0 ok, 0 repairable, 1 corrupt, 0 unsupported\n`)
  })
})


describe('checkLog (src/jsonl/check-log.ts)', () => {
  test("gives inspect's count and repair, closers included, for any events and any tail", async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    let n = 0
    const seen = new Set<string>() // the closers drawn, so that the property is seen to cover them all
    await fc.assert(
      fc.asyncProperty(fc.array(turnStep, { maxLength: 25 }), fc.constantFrom('', TORN, `${'\0'.repeat(40)}\n`), fc.constantFrom(0, 1), async (steps, tail, version) => {
        const id = `log-${n++}`
        const events: SessionEvent[] = steps.map((s, seq) => (s.data === undefined ? { seq, type: s.type, time: 10 + seq } : { seq, type: s.type, time: 10 + seq, data: s.data as SessionEvent['data'] }))
        const w = createJsonlPersistence({ root, formatVersion: version as 0 | 1 })
        await w.create(meta(id))
        if (events.length > 0) await w.append(id, events)
        else await writeRawLog(root, id, HEADER(id))
        await w.closeAll()
        if (tail) await writeFile(w.locate(meta(id)).path, tail, { flag: 'a' })
        const inspected = await p.inspect(id)
        const checked = await checkLog(root, id)
        const closers = inspected.repair?.closers.length ?? 0
        for (const c of inspected.repair?.closers ?? []) seen.add(c.type)
        if (inspected.repair?.closers.some((c) => c.type === 'step/end' && (c.data as { step?: unknown }).step !== null)) seen.add('a numbered step')
        expect(checked.events).toBe(inspected.events.length - closers)
        if (inspected.repair) {
          const { persisted, ...report } = inspected.repair
          expect(persisted).toBe(false)
          expect(checked.repair).toEqual(report)
        } else expect(checked.repair).toBeUndefined()
      }),
      { numRuns: 300, seed: 15 },
    )
    expect([...seen].sort()).toEqual(['a numbered step', 'step/end', 'tool/result', 'turn/end'])
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close

  test('the errors are inspect’s: E_NOT_FOUND, E_AMBIGUOUS, E_CORRUPT, E_FORMAT_UNSUPPORTED, E_INVALID_ID', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await writeRawLog(root, 'broken', `${HEADER('broken')}{"seq":0,"type":"turn/start","time":1}\ngarbage\n{"seq":2,"type":"turn/end","time":2}\n`)
    await writeRawLog(root, 'future', '{"type":"session","version":2,"id":"future","createdAt":5,"delegationDepth":0}\n')
    await writeRawLog(root, 'twice', HEADER('twice'))
    await mkdir(join(root, 'b2'))
    await writeFile(join(root, 'b2', 'twice.jsonl'), HEADER('twice'))
    for (const id of ['broken', 'future', 'twice', 'absent', '']) {
      const wanted = await p.inspect(id).then(
        () => undefined,
        (e: Error & { code: string }) => ({ name: e.name, code: e.code, message: e.message }),
      )
      expect(wanted, id).toBeDefined()
      await expect(checkLog(root, id), id).rejects.toMatchObject(wanted!)
    }
  })
})
