import { appendFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { ev, meta, turn } from './helpers/events.js'
import { runCli as run } from './helpers/run-cli.js'

// `show --last n` and `show --from s [--to t]` print a page of a session through `read` (§15.2):
// a header line says which seqs of how many are shown, and only those events are printed.

let root: string // shared by the whole file (tmpRoot() is removed after each test)
afterAll(() => rm(root, { recursive: true, force: true }))
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-range-'))
  const p = createJsonlPersistence({ root })
  await p.create(meta('long-one'))
  await p.append('long-one', [...turn(0, 1), ...turn(4, 2), ...turn(8, 3)])
  await p.create(meta('long-two'))
  await p.append('long-two', turn(0, 1))
  // A compacted session: turns 1 and 2, then in turn 3 a compaction keeping turn 2 on.
  await p.create(meta('compacted'))
  await p.append('compacted', [
    ...turn(0, 1),
    ...turn(4, 2),
    ev(8, 'turn/start', { turn: 3 }),
    ev(9, 'user/message', { content: 'question 3' }),
    ev(10, 'history/compact', { summary: 'Turn 1 asked question 1 and got answer 1.', firstKeptSeq: 4 }),
    ev(11, 'assistant/message', { turn: 3, step: 0, content: [{ type: 'text', text: 'answer 3' }] }),
    ev(12, 'turn/end', { turn: 3, reason: { kind: 'completed' } }),
  ])
  await p.create(meta('torn'))
  await p.append('torn', turn(0, 1))
  await p.closeAll()
  await appendFile(p.locate(meta('torn')).path, '{"seq":4,"type":"turn/sta')
})

const lines = (s: string) => s.split('\n')

describe('session-jsonl show --last / --from / --to', () => {
  test('--last n: the last n events, and which seqs of how many they are', async () => {
    const r = await run(['--root', root, 'show', 'long-one', '--last', '4'])
    expect(r.code).toBe(0)
    expect(lines(r.stdout).slice(0, 3)).toEqual(['session long-one', expect.stringMatching(/^created /), 'showing seqs 8 to 11 of 12 event(s)'])
    expect(r.stdout).toContain('── turn 3 ──')
    expect(r.stdout).toContain('user: question 3')
    expect(r.stdout).not.toContain('question 2')
    const more = await run(['--root', root, 'show', 'long-one', '--last', '100'])
    expect(more.stdout).toContain('showing seqs 0 to 11 of 12 event(s)')
  })

  test('--from s --to t: the events with s <= seq < t; without --to, to the end; past the end, none', async () => {
    const mid = await run(['--root', root, 'show', 'long-one', '--from', '4', '--to', '6'])
    expect(mid.code).toBe(0)
    expect(mid.stdout).toContain('showing seqs 4 to 5 of 12 event(s)')
    expect(lines(mid.stdout).slice(3)).toEqual(['', '── turn 2 ──', 'user: question 2', ''])
    const rest = await run(['--root', root, 'show', 'long-one', '--from', '10'])
    expect(rest.stdout).toContain('showing seqs 10 to 11 of 12 event(s)')
    expect(rest.stdout).toContain('assistant: answer 3')
    expect(rest.stdout).toContain('── end of turn 3 (completed)')
    const past = await run(['--root', root, 'show', 'long-one', '--from', '50'])
    expect(past.code).toBe(0)
    expect(past.stdout).toContain('showing no events: seq 50 is past the end (12 event(s), seqs 0 to 11)')
    const clipped = await run(['--root', root, 'show', 'long-one', '--from', '11', '--to', '99'])
    expect(clipped.stdout).toContain('showing seqs 11 to 11 of 12 event(s)')
  })

  test('--json prints the page as read returns it', async () => {
    const r = await run(['--root', root, 'show', 'long-one', '--last', '2', '--json'])
    const page = JSON.parse(r.stdout)
    expect(page.meta.id).toBe('long-one')
    expect(page.firstSeq).toBe(10)
    expect(page.length).toBe(12)
    expect(page.events.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual([
      [10, 'assistant/message'],
      [11, 'turn/end'],
    ])
  })

  test('--last on a compacted session: the summary, what it replaces, and the messages it replaced marked', async () => {
    const r = await run(['--root', root, 'show', 'compacted', '--last', '12'])
    expect(r.code).toBe(0)
    const out = lines(r.stdout)
    expect(out).toContain('showing seqs 1 to 12 of 13 event(s)')
    expect(out).toContain('user: question 1 [compacted]')
    expect(out).toContain('assistant: answer 1 [compacted]')
    expect(out).toContain('user: question 2')
    // The page starts at seq 1: what came before it is not counted, so how many messages the
    // compaction replaced (all before seq 4, from the log's start) is not said — a page that
    // started later said 0 of messages it never saw (a hunt's find); the compaction is the last.
    expect(out).toContain("⇤ history compacted: the summary replaces the messages before seq 4 in the model's history; in force")
    const whole = await run(['--root', root, 'show', 'compacted', '--last', '13'])
    expect(whole.stdout).toContain('showing seqs 0 to 12 of 13 event(s)')
    expect(whole.stdout).toContain("⇤ history compacted: the summary replaces 2 message(s) before seq 4 in the model's history; in force")
    const middle = await run(['--root', root, 'show', 'compacted', '--from', '3', '--to', '11'])
    expect(middle.stdout).toContain("⇤ history compacted: the summary replaces the messages before seq 4 in the model's history")
    expect(middle.stdout).not.toContain('replaces 0 message(s)')
    expect(out).toContain('  summary: Turn 1 asked question 1 and got answer 1.')
    expect(out).toContain('assistant: answer 3')
    const short = await run(['--root', root, 'show', 'compacted', '--last', '3'])
    // The page starts after firstKeptSeq: how many messages it replaces is not known there.
    expect(short.stdout).toContain("⇤ history compacted: the summary replaces the messages before seq 4 in the model's history; in force")
    const full = await run(['--root', root, 'show', 'compacted'])
    expect(full.stdout).toContain("⇤ history compacted: the summary replaces 2 message(s) before seq 4 in the model's history; in force")
    const md = await run(['--root', root, 'export', 'compacted', '--format', 'md'])
    expect(md.stdout).toContain('**Summary:** Turn 1 asked question 1 and got answer 1.')
    expect(md.stdout).toContain("*(compacted: seq 1 is replaced in the model's history by the summary at seq 10)*")
  })

  test('a torn tail is never shown in a page', async () => {
    const r = await run(['--root', root, 'show', 'torn', '--last', '10'])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('showing seqs 0 to 3 of 4 event(s)')
    expect(r.stdout).not.toContain('turn/sta')
  })

  test('bad ranges are usage errors (exit 2), unknown and ambiguous ids fail (exit 1): one line on stderr each', async () => {
    const usage = [
      ['--last', '-1'],
      ['--last=-1'],
      ['--last', '0'],
      ['--last', 'x'],
      ['--from', 'x'],
      ['--from', '-3'],
      ['--from', '5', '--to', '3'],
      ['--from', '5', '--to', '5'],
      ['--to', '3'],
      ['--last', '2', '--from', '1'],
      ['--raw', '--last', '2'],
      ['--from', '1', '--to', 'y'],
    ]
    for (const args of usage) {
      const r = await run(['--root', root, 'show', 'long-one', ...args])
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1)
      expect(r.stdout, args.join(' ')).toBe('')
    }
    expect((await run(['--root', root, 'show', 'long-one', '--from', '5', '--to', '3'])).stderr).toContain('--to 3 must be after --from 5')
    const unknown = await run(['--root', root, 'show', 'nope', '--last', '3'])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/^session-jsonl: E_NOT_FOUND: .*\n$/)
    const ambiguous = await run(['--root', root, 'show', 'long', '--from', '0'])
    expect(ambiguous.code).toBe(1)
    expect(ambiguous.stderr).toMatch(/^session-jsonl: E_AMBIGUOUS: .*long-one, long-two.*\n$/)
  }, 120_000) // up to 16 s on a loaded machine: the 30 s default was too close
})
