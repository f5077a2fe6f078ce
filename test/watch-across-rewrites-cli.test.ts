import { open, readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { startCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `session-jsonl tail -f` (§11, §15.3) across the rewrites of §16: a redaction is followed (its
// record printed, appends after it too); a truncation that cut what it printed stops it, said on
// stderr, exit 1, never printing on into the events after the cut.

test('tail -f across a redaction (followed: its record, the appends after it) and then a truncation that cut what it printed (E_CORRUPT on stderr, exit 1)', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('d'))
  const events = [...turn(0, 1), ...turn(4, 2)]
  await p.append('d', events)
  await p.close('d')
  const path = p.locate(meta('d')).path
  const tail = startCli(['--root', root, 'tail', 'd', '-n', '3', '-f', '--json'])
  try {
    expect(await tail.waitForLines(3)).toEqual(events.slice(5).map((e) => JSON.stringify(e)))
    await p.redact('d', { pattern: /answer 2/ })
    await p.load('d')
    const more = turn(9, 3)
    await p.append('d', more)
    await p.close('d')
    const lines = await tail.waitForLines(8)
    expect(JSON.parse(lines[3]!)).toMatchObject({ seq: 8, type: 'log/redacted', data: { matches: 1, seqs: [6] } })
    expect(lines.slice(4)).toEqual(more.map((e) => JSON.stringify(e)))
    // seq 10's line (printed) damaged, then the log cut there: 0–9, a closer (10), the record (11), and more
    const bytes = await readFile(path)
    const h = await open(path, 'r+')
    await h.write(Buffer.from('#'), 0, 1, bytes.indexOf('question 3'))
    await h.close()
    expect(await p.truncateAtDamage('d')).toMatchObject({ keptEvents: 10 })
    await p.load('d')
    await p.append('d', turn(12, 4))
    await p.close('d')
    const { code } = await tail.exit()
    expect(code).toBe(1)
    expect(tail.stderr()).toMatch(/^session-jsonl: E_CORRUPT: .*no longer holds the event seq 12 .*; stopped following\n$/)
    expect(tail.lines).toHaveLength(8) // nothing of the history written after the cut
  } finally {
    tail.child.kill('SIGKILL')
  }
})

test('tail -f whose printed events a truncation cut (those `read` printed, before any the watch did): E_CORRUPT on stderr, exit 1', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('d'))
  await p.append('d', [...turn(0, 1), ...turn(4, 2)])
  await p.close('d')
  const path = p.locate(meta('d')).path
  const tail = startCli(['--root', root, 'tail', 'd', '-n', '3', '-f'])
  try {
    await tail.waitForLines(3) // seqs 5, 6, 7
    // seq 5's line damaged, then the log cut there: 0–4, a closer (5), the record (6), and more
    const bytes = await readFile(path)
    const h = await open(path, 'r+')
    await h.write(Buffer.from('#'), 0, 1, bytes.indexOf('question 2'))
    await h.close()
    await p.truncateAtDamage('d')
    await p.load('d')
    await p.append('d', turn(7, 3))
    await p.close('d')
    const { code } = await tail.exit()
    expect(code).toBe(1)
    expect(tail.stderr()).toMatch(/^session-jsonl: E_CORRUPT: .*no longer holds the event seq 7 .*; stopped following\n$/)
    expect(tail.lines).toHaveLength(3) // nothing of the history written after the cut
  } finally {
    tail.child.kill('SIGKILL')
  }
})
