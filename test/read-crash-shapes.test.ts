import { readFile, writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent } from '../src/session/schema.js'
import { codeOf } from './helpers/codes.js'
import { ev, meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `read` (§15.2) on the logs a crash or damage leaves: `length` counts the valid events (a
// torn tail, zeroed blocks before valid lines included (6.3), is not returned), and damage
// in a range that reaches the end rejects as `load` would, an empty range included.

const seqs = (events: readonly SessionEvent[]) => events.map((e) => e.seq)

/** A log of turn 1 (seqs 0-3), then a write of turn 2 (seqs 4-9) a power cut left with its first line zeroed. */
async function zeroedWrite(root: string, version: 0 | 1) {
  const p = createJsonlPersistence({ root, formatVersion: version })
  await p.create(meta('z'))
  await p.append('z', turn(0, 1))
  await p.append('z', [ev(4, 'turn/start', { turn: 2 }), ...[5, 6, 7, 8, 9].map((s) => ev(s, 'user/message', { content: `unacknowledged ${s}` }))])
  await p.closeAll()
  const path = p.locate(meta('z')).path
  const bytes = await readFile(path)
  const lines = bytes.toString('latin1').split('\n')
  const at = lines.slice(0, 5).reduce((n, l) => n + l.length + 1, 0) // header + seqs 0-3
  bytes.fill(0, at, at + (lines[5] as string).length) // the line of seq 4, its newline kept
  await writeFile(path, bytes)
}

describe.each([0, 1] as const)('version %i: read after a write came back with a zeroed first line', (version) => {
  test('`last: n` returns the last valid events and the valid length, not the lines after the zeros', async () => {
    const root = await tmpRoot()
    await zeroedWrite(root, version)
    const p = createJsonlPersistence({ root })
    expect((await p.inspect('z')).events.filter((e) => e.type !== 'turn/end' || e.seq < 4).length).toBe(4) // the load's view: seqs 0-3
    const last = await p.read('z', { last: 2 })
    expect(seqs(last.events)).toEqual([2, 3])
    expect(last.length).toBe(4)
    expect(last.firstSeq).toBe(2)
    const past = await p.read('z', { fromSeq: 5 })
    expect(past.events).toEqual([])
    expect(past.length).toBe(4)
  })

  test('`show --last n` and `tail -n n` print those events', async () => {
    const root = await tmpRoot()
    await zeroedWrite(root, version)
    const shown = await runCli(['--root', root, 'show', 'z', '--last', '2', '--json'])
    expect(shown.code).toBe(0)
    const page = JSON.parse(shown.stdout) as { events: SessionEvent[]; firstSeq: number; length: number }
    expect({ seqs: seqs(page.events), firstSeq: page.firstSeq, length: page.length }).toEqual({ seqs: [2, 3], firstSeq: 2, length: 4 })
    const tailed = await runCli(['--root', root, 'tail', 'z', '-n', '2', '--json'])
    expect(tailed.code).toBe(0)
    expect(seqs(tailed.stdout.trim().split('\n').map((l) => JSON.parse(l) as SessionEvent))).toEqual([2, 3])
  })
})

describe('version 1: a damaged last line', () => {
  async function damagedLast(root: string) {
    const p = createJsonlPersistence({ root })
    await p.create(meta('v'))
    await p.append('v', [...turn(0, 1), ev(4, 'user/message', { content: 'important' })])
    await p.closeAll()
    const path = p.locate(meta('v')).path
    await writeFile(path, (await readFile(path, 'latin1')).replace('important', 'importanT'), 'latin1')
  }

  test('a range reaching it rejects E_CORRUPT, an empty one (starting at it, or `last: 0`) too; a range before it is read', async () => {
    const root = await tmpRoot()
    await damagedLast(root)
    const p = createJsonlPersistence({ root })
    expect(await codeOf(p.load('v'))).toBe('E_CORRUPT')
    for (const range of [{ fromSeq: 4 }, { fromSeq: 4, toSeq: 5 }, { fromSeq: 9 }, { last: 1 }, { last: 0 }]) {
      expect([JSON.stringify(range), await codeOf(p.read('v', range))]).toEqual([JSON.stringify(range), 'E_CORRUPT'])
    }
    expect(seqs((await p.read('v', { fromSeq: 0, toSeq: 2 })).events)).toEqual([0, 1])
  })

  test('`show --from` at it exits 1 with E_CORRUPT, as `show --last` and `verify` do', async () => {
    const root = await tmpRoot()
    await damagedLast(root)
    for (const args of [['show', 'v', '--from', '4'], ['show', 'v', '--last', '1']]) {
      const r = await runCli(['--root', root, ...args])
      expect([args.join(' '), r.code, /E_CORRUPT.*checksum mismatch/.test(r.stderr)]).toEqual([args.join(' '), 1, true])
    }
  })
})
