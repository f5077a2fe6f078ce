// A compacted JsonlSession whose log is damaged before its tail (format version 1: a changed byte
// fails that line's checksum) resumes from the tail: the load reads only the tail, and the turn
// numbers continue: the turns just before the tail are read back past the damaged line, so
// numbers never repeat what the log holds.
import type { AgentInputItem } from '@openai/agents'
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { JsonlSession, summaryItem } from '../src/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf } from './helpers/codes.js'
import { recordedPersistence } from './helpers/recorded-persistence.js'
import { tmpRoot } from './helpers/tmp-root.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'

async function logFile(root: string, id: string): Promise<string> {
  const dir = (await readdir(root)).find((d) => !d.startsWith('.'))!
  return join(root, dir, `${id}.jsonl`)
}

/** Changes one digit of the `time` of the line holding seq `seq` (line 1 is the header). */
async function damageLine(root: string, id: string, seq: number): Promise<void> {
  const file = await logFile(root, id)
  const lines = (await readFile(file, 'utf8')).split('\n')
  const line = lines[seq + 1]!
  expect(JSON.parse(line).seq).toBe(seq)
  const at = line.indexOf('"time":') + '"time":'.length
  lines[seq + 1] = line.slice(0, at) + (line[at] === '1' ? '2' : '1') + line.slice(at + 1)
  await writeFile(file, lines.join('\n'))
}

/** The events of the log's lines from seq `from` on, read as text (a range read may bisect into the damage). */
async function linesFrom(root: string, id: string, from: number): Promise<SessionEvent[]> {
  const lines = (await readFile(await logFile(root, id), 'utf8')).split('\n').slice(1).filter((l) => l !== '')
  return lines.map((l) => JSON.parse(l) as SessionEvent).filter((e) => e.seq >= from)
}

// The damage lies a few lines before the tail, inside the JSONL reader's bisection window (16
// KiB): its later reads from the tail start at the tail's own line (seq-search.ts `lineOf`), so
// they do not meet it.
const LONG = 'x'.repeat(64)
const QUESTIONS = ['one', 'two', `three ${LONG}`]

const turnsOf = (events: readonly SessionEvent[]) => events.filter((e) => e.type === 'turn/start').map((e) => (e.data as { turn: number }).turn)
const userSeq = (events: readonly SessionEvent[], content: string) => events.find((e) => e.type === 'user/message' && (e.data as { content: unknown }).content === content)!.seq
const user = (content: string): AgentInputItem => ({ type: 'message', role: 'user', content })
const answer = (text: string): AgentInputItem => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] })

describe('OpenAI Agents: a resume from the tail of a log damaged before it', () => {
  it('a compaction this adapter wrote: the turn numbers continue from it, reading nothing before the tail', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root, formatVersion: 1 })
    const first = new JsonlSession({ persistence: open(), sessionId: 's' })
    for (const q of QUESTIONS) await first.addItems([user(q), answer(`re ${q}`)])
    await first.compact({ summary: 'S' }) // keeps nothing: the tail is the compaction alone
    await first.close()
    const at = (await open().read('s')).length - 1
    await damageLine(root, 's', userSeq((await open().read('s')).events, 'two'))
    expect(await codeOf(open().read('s'))).toBe('E_CORRUPT') // the damage is there

    const { persistence, seen } = recordedPersistence(open())
    const resumed = new JsonlSession({ persistence, sessionId: 's' })
    expect(await resumed.getItems()).toEqual([summaryItem('S')])
    await resumed.addItems([user('four'), answer('re four')])
    expect(seen.loads).toEqual([{ firstSeq: at, length: 1 }])
    expect(seen.reads.filter((r) => (r.fromSeq ?? 0) < at)).toEqual([]) // nothing read before the tail
    // Compactions on the resumed session, a pop that records one again, resumes from them.
    await resumed.compact({ summary: 'T', keepItems: 1 })
    expect(await resumed.popItem()).toEqual(answer('re four'))
    await resumed.close()
    const again = new JsonlSession({ persistence: open(), sessionId: 's' })
    await again.addItems([user('five')])
    await again.compact({ summary: 'U' })
    await again.close()
    const third = new JsonlSession({ persistence: open(), sessionId: 's' })
    await third.addItems([user('six')])
    expect(await third.getItems()).toEqual([summaryItem('U'), user('six')])
    await third.close()
    expect(turnsOf(await linesFrom(root, 's', at))).toEqual([4, 5, 6])
  })

  it('a compaction without a recorded number: the turns before the tail are read back past the damage', async () => {
    const root = await tmpRoot()
    const open = () => createJsonlPersistence({ root, formatVersion: 1 })
    const first = new JsonlSession({ persistence: open(), sessionId: 'h' })
    for (const q of QUESTIONS) await first.addItems([user(q), answer(`re ${q}`)])
    await first.close()
    // Another host records the compaction: {summary, firstKeptSeq} and nothing else.
    const host = open()
    const { events } = await host.load('h')
    const at = events.length
    await host.append('h', [{ seq: at, type: 'history/compact', time: 1, data: { summary: 'S', firstKeptSeq: at } }])
    await host.close('h')
    // Turn 2's user message, in the page read back for the number (a line the tail load does not parse).
    await damageLine(root, 'h', userSeq(events, 'two'))

    const resumed = new JsonlSession({ persistence: open(), sessionId: 'h' })
    await resumed.addItems([user('four')])
    expect(await resumed.getItems()).toEqual([summaryItem('S'), user('four')])
    await resumed.close()
    expect(turnsOf(await linesFrom(root, 'h', at))).toEqual([4])
  })
})
