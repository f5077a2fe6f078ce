import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { runCliWithHeap } from './helpers/run-cli.js'
import { specSeal } from './helpers/spec-seal.js'

// §16, §15.5: `redact` streams. A version-1 log three times the size of the process's whole
// heap limit, with a torn tail and an open turn, is redacted by the CLI under that limit: the
// tail is repaired first (cut, the turn closed), every match replaced, the log/redacted record
// appended. A redact that loads the log (every event in memory) runs out of heap, so this test
// fails until redact reads the log in bounded memory.

const HEAP_MB = 64
const LOG_BYTES = 200 * 1024 * 1024
const ID = 'huge'

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spj-redact-big-'))
}, 120_000)
afterAll(() => rm(dir, { recursive: true, force: true }))

/** A line sealed as §16 writes it, from the spec's formula: `P + ',"crc":"' + H + '"}'`. */
function sealed(value: unknown): string {
  return `${specSeal(JSON.stringify(value))}\n`
}

const secretOf = (n: number) => `sk-live-${n.toString(16).padStart(8, '0')}`

/**
 * A version-1 log (header and first turn written by the package, the rest sealed by hand, line
 * by line, so making it costs no memory) of complete turns until it holds `bytes`; every 50th
 * turn carries a secret in its question and twice in its tool result. It ends with an open turn
 * whose question holds a secret, then a torn line.
 */
async function writeBigV1Log(root: string, bytes: number) {
  const p = createJsonlPersistence({ root })
  await p.create(meta(ID))
  await p.append(ID, turn(0, 0))
  await p.close(ID)
  const path = p.locate(meta(ID)).path
  const out = createWriteStream(path, { flags: 'a' })
  let size = 0
  let seq = 4
  const seqs: number[] = []
  let matches = 0
  const write = async (line: string) => {
    size += Buffer.byteLength(line)
    if (!out.write(line)) await once(out, 'drain')
  }
  const filler = 'y'.repeat(2_000)
  for (let n = 1; size < bytes; n++) {
    const secret = n % 50 === 0 ? secretOf(n) : undefined
    const t = 1_700_000_100_000 + seq
    const callId = `call-${n}`
    const events = [
      { type: 'turn/start', data: { turn: n } },
      { type: 'user/message', data: { content: `question ${n}${secret ? ` key ${secret}` : ''}` } },
      { type: 'assistant/message', data: { turn: n, step: 0, content: [{ type: 'tool-call', callId, name: 'read', arguments: { n } }] } },
      { type: 'tool/result', data: { turn: n, step: 0, callId, content: [{ type: 'text', text: `${n} ${secret ? `${secret} and ${secret} ` : ''}${filler}` }] } },
      { type: 'assistant/message', data: { turn: n, step: 1, content: [{ type: 'text', text: `answer ${n}` }] } },
      { type: 'turn/end', data: { turn: n, reason: { kind: 'completed' } } },
    ]
    for (const e of events) {
      if (secret && e.type === 'user/message') (seqs.push(seq), (matches += 1))
      if (secret && e.type === 'tool/result') (seqs.push(seq), (matches += 2))
      await write(sealed({ seq: seq++, type: e.type, time: t, data: e.data }))
    }
  }
  // An open turn whose question holds a secret, then a torn line: repaired first, as a load would.
  const openSecret = secretOf(0xfffff)
  await write(sealed({ seq, type: 'turn/start', time: 1_800_000_000_000, data: { turn: 1e6 } }))
  seq++
  seqs.push(seq)
  matches++
  await write(sealed({ seq, type: 'user/message', time: 1_800_000_000_001, data: { content: `last ${openSecret}` } }))
  seq++
  await write(`{"seq":${seq},"type":"assistant/mess`)
  out.end()
  await once(out, 'close')
  return { path, events: seq, seqs, matches }
}

describe(`redact of a ${LOG_BYTES / 1024 / 1024} MiB log with a ${HEAP_MB} MiB heap`, () => {
  test('the CLI exits 0; the log loads with its tail repaired, every match replaced and the log/redacted record last', async () => {
    const root = join(dir, 'root')
    const log = await writeBigV1Log(root, LOG_BYTES)
    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', root, 'redact', ID, '--pattern', 'sk-live-[0-9a-f]{8}', '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    const [outcome] = JSON.parse(stdout).redact
    expect(outcome).toEqual({ id: ID, status: 'done', matches: log.matches, seqs: log.seqs, repair: expect.objectContaining({ persisted: true, droppedLines: 1, reason: 'torn tail: the last line has no newline' }) })
    expect((await readdir(dirname(log.path))).filter((n) => n.startsWith('.'))).toEqual([]) // no temporary file left

    const p = createJsonlPersistence({ root })
    const loaded = await p.load(ID)
    await p.close(ID)
    expect(loaded.repair).toBeUndefined() // repaired before the rewrite: nothing left to repair
    const events = loaded.events
    // the valid events, the closers of the open turn, then the record
    const closers = events.slice(log.events, -1)
    expect(closers.length).toBeGreaterThan(0)
    expect(outcome.repair.closers).toEqual(closers) // the report's closers are those written
    expect(closers.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1e6 } })
    const record = events.at(-1)!
    expect(record).toMatchObject({ seq: events.length - 1, type: 'log/redacted', ignorable: true, data: { matches: log.matches, seqs: log.seqs, replacement: '[REDACTED]' } })
    expect(events.every((e, i) => e.seq === i)).toBe(true)
    const wanted = new Set(log.seqs)
    let redacted = 0
    for (const e of events.slice(0, log.events)) {
      const text = JSON.stringify(e)
      expect(text.includes('sk-live-')).toBe(false)
      if (text.includes('[REDACTED]')) {
        expect(wanted.has(e.seq)).toBe(true)
        redacted += text.split('[REDACTED]').length - 1
      }
    }
    expect(redacted).toBe(log.matches)
    expect(events[log.events - 1]).toMatchObject({ type: 'user/message', data: { content: 'last [REDACTED]' } })
  }, 600_000)
})
