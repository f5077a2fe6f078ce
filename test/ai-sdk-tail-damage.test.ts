// A compacted AI SDK session whose log is damaged before its tail (format version 1: a changed
// byte fails that line's checksum) resumes from the tail: the load reads only the tail, and the
// turn numbers continue from the number the compaction recorded, without reading further back.
// A compaction another host wrote (no number recorded) is resumed too: the turns just before
// the tail are read back past the damaged line, so numbers never repeat what the log holds.
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { SessionPersistenceError } from '../src/errors.js'
import type { SessionPersistence } from '../src/persistence.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf } from './helpers/codes.js'
import { delegate, recordedPersistence } from './helpers/recorded-persistence.js'
import { tmpRoot } from './helpers/tmp-root.js'

/** Changes one digit of the `time` of the line holding seq `seq` (line 1 is the header). */
async function damageLine(root: string, id: string, seq: number): Promise<void> {
  const file = await logFile(root, id)
  const lines = (await readFile(file, 'utf8')).split('\n')
  const line = lines[seq + 1]!
  expect(JSON.parse(line).seq).toBe(seq)
  const at = line.indexOf('"time":') + '"time":'.length
  const digit = line[at]!
  lines[seq + 1] = line.slice(0, at) + (digit === '1' ? '2' : '1') + line.slice(at + 1)
  await writeFile(file, lines.join('\n'))
}

async function logFile(root: string, id: string): Promise<string> {
  const dir = (await readdir(root)).find((d) => !d.startsWith('.'))!
  return join(root, dir, `${id}.jsonl`)
}

/** The events of the log's lines from seq `from` on, read as text (a range read may bisect into the damage). */
async function linesFrom(root: string, id: string, from: number): Promise<SessionEvent[]> {
  const lines = (await readFile(await logFile(root, id), 'utf8')).split('\n').slice(1).filter((l) => l !== '')
  return lines.map((l) => JSON.parse(l) as SessionEvent).filter((e) => e.seq >= from)
}

const turnsOf = (events: readonly SessionEvent[]) => events.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)

describe('AI SDK: a resume from the tail of a log damaged before it', () => {
  it('continues the turn numbers from the compaction, reading nothing before the tail', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root, formatVersion: 1 })
    const first = await openAiSdkSession({ persistence: open(), sessionId: 's' })
    for (const q of ['one', 'two', 'three']) await first.turn(q).end({ kind: 'completed' })
    await first.compact({ summary: 'S' }) // keeps nothing: the tail is the compaction alone
    await first.close()
    const at = (await open().read('s')).length - 1
    await damageLine(root, 's', 4) // turn 2's user message
    expect(await codeOf(open().read('s'))).toBe('E_CORRUPT') // the damage is there

    const { persistence, seen } = recordedPersistence(open())
    const resumed = await openAiSdkSession({ persistence, sessionId: 's' })
    expect(resumed.firstSeq).toBe(at)
    expect(seen.reads).toEqual([]) // nothing read before the tail
    const turn = resumed.turn('four')
    expect(turn.number).toBe(4)
    await turn.end({ kind: 'completed' })
    await resumed.close()
    const again = await openAiSdkSession({ persistence: open(), sessionId: 's' })
    expect(again.turn('five').number).toBe(5)
    await again.close()
    expect(turnsOf(await linesFrom(root, 's', at))).toEqual([4, 5])
  })

  it('a compaction without a recorded number: the turns before the tail are read back past the damage', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root, formatVersion: 1 })
    const first = await openAiSdkSession({ persistence: open(), sessionId: 'h' })
    for (const q of ['one', 'two', 'three']) await first.turn(q).end({ kind: 'completed' })
    await first.close()
    // Another host records the compaction: {summary, firstKeptSeq} and nothing else.
    const host = open()
    const { events } = await host.load('h')
    const at = events.length
    await host.append('h', [{ seq: at, type: 'history/compact', time: 1, data: { summary: 'S', firstKeptSeq: at } }])
    await host.close('h')
    // Turn 3's user message, in the page read back for the number (a line the tail load does not parse).
    expect(events[at - 2]).toMatchObject({ type: 'user/message' })
    await damageLine(root, 'h', at - 2)

    const resumed = await openAiSdkSession({ persistence: open(), sessionId: 'h' })
    const turn = resumed.turn('four')
    expect(turn.number).toBe(4)
    await turn.end({ kind: 'completed' })
    await resumed.close()
    expect(turnsOf(await linesFrom(root, 'h', at))).toEqual([4])
  })
})

describe('AI SDK: the read back for the last turn number fails on anything but damage', () => {
  it('an E_IO there fails the resume, and the session is not left locked', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root, formatVersion: 1 })
    const first = await openAiSdkSession({ persistence: open(), sessionId: 'io' })
    for (const q of ['one', 'two']) await first.turn(q).end({ kind: 'completed' })
    await first.close()
    const host = open()
    const at = (await host.load('io')).events.length
    await host.append('io', [{ seq: at, type: 'history/compact', time: 1, data: { summary: 'S', firstKeptSeq: at } }])
    await host.close('io')
    const inner = open()
    const failing: SessionPersistence = {
      ...delegate(inner),
      read: async () => {
        throw new SessionPersistenceError('E_IO', 'disk gone')
      },
    }
    expect(await codeOf(openAiSdkSession({ persistence: failing, sessionId: 'io' }))).toBe('E_IO')
    // Released: the same backend instance opens it again.
    const resumed = await openAiSdkSession({ persistence: inner, sessionId: 'io' })
    expect(resumed.turn('three').number).toBe(3)
    await resumed.close()
  })
})
