import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent } from '../src/index.js'
import { ev, meta, turn } from './helpers/events.js'
import { runCli as run, startCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// `tail` prints the last events of a session; `tail -f` then follows it as any process writes
// it (§11, through `watch`, §15.3), until interrupted or until the session is deleted.

async function rootWith(id: string, events: SessionEvent[]) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, events)
  return { root, p }
}

const parse = (lines: string[]) => lines.map((l) => JSON.parse(l) as SessionEvent)

describe('session-jsonl tail', () => {
  test('the last 10 events by default, -n n of them, one readable line each; --json the events as stored', async () => {
    const events = [...turn(0, 1), ...turn(4, 2), ...turn(8, 3)]
    const { root, p } = await rootWith('t1', events)
    await p.closeAll()
    const plain = await run(['--root', root, 'tail', 't1'])
    expect(plain.code).toBe(0)
    expect(plain.stdout.trimEnd().split('\n')).toHaveLength(10)
    expect(plain.stdout.split('\n')[0]).toBe('#2 assistant: answer 1')
    const three = await run(['--root', root, 'tail', 't1', '-n', '3'])
    expect(three.stdout).toBe('#9 user: question 3\n#10 assistant: answer 3\n#11 ── end of turn 3 (completed)\n')
    const json = await run(['--root', root, 'tail', 't1', '-n', '4', '--json'])
    expect(parse(json.stdout.trimEnd().split('\n'))).toEqual(events.slice(8))
    expect((await run(['--root', root, 'tail', 't1', '-n', '0'])).stdout).toBe('')
    expect((await run(['--root', root, 'tail', 't1', '--lines', '1'])).stdout).toBe('#11 ── end of turn 3 (completed)\n')
  })

  test('tool calls, results, chunks, rewinds and compactions each read as one line', async () => {
    const { root, p } = await rootWith('t2', [
      ev(0, 'turn/start', { turn: 1 }),
      ev(1, 'assistant/chunk', { turn: 1, step: 0, chunk: { text: 'Let' } }),
      ev(2, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool-call', callId: 'k1', name: 'grep', arguments: { q: 'x' } }] }),
      ev(3, 'tool/result', { turn: 1, step: 0, callId: 'k1', content: [{ type: 'text', text: 'line\nmore' }], isError: true }),
      ev(4, 'history/rewind', { to: 1 }),
      ev(5, 'history/compact', { summary: 'Looked for x.', firstKeptSeq: 4 }),
      ev(6, 'tool/output', { part: 1 }),
    ])
    await p.closeAll()
    const r = await run(['--root', root, 'tail', 't2'])
    expect(r.stdout.trimEnd().split('\n')).toEqual([
      '#0 ── turn 1 ──',
      '#1 assistant (chunk) {"text":"Let"}',
      '#2 assistant: Let me look.  → grep {"q":"x"} [k1]',
      '#3 ← [k1] error: line more',
      "#4 ↶ history rewound to seq 1: the messages from seq 1 to 3 are out of the model's history",
      "#5 ⇤ history compacted: the summary replaces the messages before seq 4 in the model's history: Looked for x.",
      '#6 (tool/output) {"part":1}',
    ])
  })

  test('-f: every event another process appends, once and in order; the session deleted ends it (said on stderr, exit 0)', async () => {
    const { root, p } = await rootWith('live', turn(0, 1))
    const tail = startCli(['--root', root, 'tail', 'live', '-n', '2', '-f', '--json'])
    try {
      expect(parse(await tail.waitForLines(2)).map((e) => e.seq)).toEqual([2, 3])
      const more = turn(4, 2)
      await p.append('live', more.slice(0, 2))
      expect(parse(await tail.waitForLines(4)).slice(2)).toEqual(more.slice(0, 2))
      await p.append('live', more.slice(2))
      expect(parse(await tail.waitForLines(6)).slice(2)).toEqual(more)
      await p.closeAll()
      await createJsonlPersistence({ root }).delete('live')
      expect(await tail.exit()).toEqual({ code: 0, signal: null })
      expect(tail.stderr()).toBe("session 'live' was deleted; stopped following\n")
      expect(tail.lines).toHaveLength(6)
    } finally {
      tail.child.kill('SIGKILL')
      await p.closeAll()
    }
  })

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`-f ends cleanly on ${signal}: exit 0, nothing on stderr`, async () => {
      const { root, p } = await rootWith('followed', turn(0, 1))
      const tail = startCli(['--root', root, 'tail', 'followed', '-f'])
      try {
        expect(await tail.waitForLines(4)).toEqual(['#0 ── turn 1 ──', '#1 user: question 1', '#2 assistant: answer 1', '#3 ── end of turn 1 (completed)'])
        await p.append('followed', [ev(4, 'turn/start', { turn: 2 })])
        expect((await tail.waitForLines(5))[4]).toBe('#4 ── turn 2 ──')
        tail.child.kill(signal)
        expect(await tail.exit()).toEqual({ code: 0, signal: null })
        expect(tail.stderr()).toBe('')
      } finally {
        tail.child.kill('SIGKILL')
        await p.closeAll()
      }
    })
  }

  test('-f whose reader goes away (tail -f | head -1) exits 0 at the next event, without a stack trace', async () => {
    const { root, p } = await rootWith('piped', turn(0, 1))
    const tail = startCli(['--root', root, 'tail', 'piped', '-n', '1', '-f'])
    try {
      await tail.waitForLines(1)
      tail.child.stdout!.destroy()
      await p.append('piped', [ev(4, 'turn/start', { turn: 2 })])
      expect(await tail.exit()).toEqual({ code: 0, signal: null })
      expect(tail.stderr()).toBe('')
    } finally {
      tail.child.kill('SIGKILL')
      await p.closeAll()
    }
  })

  test('-f goes on with the closers when another process repairs the session', async () => {
    const { root, p } = await rootWith('crashed', [
      ev(0, 'turn/start', { turn: 1 }),
      ev(1, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'k9', name: 'bash', arguments: {} }] }),
    ])
    await p.closeAll() // the writer is gone with its turn open, as after a crash
    const tail = startCli(['--root', root, 'tail', 'crashed', '-f'])
    try {
      await tail.waitForLines(2)
      const repaired = createJsonlPersistence({ root })
      await repaired.load('crashed')
      await repaired.closeAll()
      expect((await tail.waitForLines(4)).slice(2)).toEqual([
        '#2 ← [k9] error: Tool call interrupted by a crash; no result was recorded. ⚠ interrupted',
        '#3 ── end of turn 1 (interrupted)',
      ])
    } finally {
      tail.child.kill('SIGKILL')
    }
  })

  test('--help', async () => {
    const r = await run(['tail', '--help'])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('usage: session-jsonl tail <id> [-n <n>] [-f] [--json]')
  })

  test('bad -n values are usage errors (exit 2); unknown and ambiguous ids fail (exit 1); one line on stderr each', async () => {
    const { root, p } = await rootWith('tail-a', turn(0, 1))
    await p.create(meta('tail-b'))
    await p.append('tail-b', turn(0, 1))
    await p.closeAll()
    for (const args of [['-n', '-1'], ['-n=-1'], ['-n', 'x'], ['-n', '1.5'], ['--lines', '']]) {
      const r = await run(['--root', root, 'tail', 'tail-a', ...args])
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1)
    }
    const unknown = await run(['--root', root, 'tail', 'nope', '-f'])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/^session-jsonl: E_NOT_FOUND: .*\n$/)
    const ambiguous = await run(['--root', root, 'tail', 'tail-', '-f'])
    expect(ambiguous.code).toBe(1)
    expect(ambiguous.stderr).toMatch(/^session-jsonl: E_AMBIGUOUS: .*tail-a, tail-b.*\n$/)
    expect((await run(['--root', root, 'tail'])).code).toBe(2)
  })
})
