import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent } from '../src/index.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A `tool/call` no assistant message holds is a call (docs/contract.md §7): the AI SDK adapter
// writes it before the step's message, so a process killed in the tool leaves only the call.
// `show` and `export --format md` print it as they print a message's call, mark it when it
// never got a result, and put a repair's interrupted result after it.

const ev = (seq: number, type: string, data: unknown): SessionEvent => ({ seq, type, time: 1_000 + seq, data }) as SessionEvent

const HEAD = ['session ai', 'created 1970-01-01T00:00:01.000Z  cwd /p  depth 0']
const DEPLOY = { turn: 1, step: 0, callId: 'call-deploy', name: 'deploy', arguments: { env: 'production' } }
const start = [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'deploy' }), ev(2, 'step/start', { turn: 1, step: 0 })]

async function stored(events: SessionEvent[]): Promise<string> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create({ id: 'ai', createdAt: 1_000, cwd: '/p', delegationDepth: 0 })
  await p.append('ai', events)
  await p.closeAll()
  return root
}

describe('show and export of a tool/call no assistant message holds', () => {
  test('a turn that ended after a lone call: its call line, marked as never answered, in the transcript and in a page', async () => {
    const root = await stored([...start, ev(3, 'tool/call', DEPLOY), ev(4, 'turn/end', { turn: 1, reason: { kind: 'aborted' } })])
    const body = ['', '── turn 1 ──', 'user: deploy', '  → deploy {"env":"production"} [call-deploy]', '    ⚠ no result recorded', '── end of turn 1 (aborted)']
    expect(await runCli(['--root', root, 'show', 'ai'])).toEqual({ code: 0, stdout: [...HEAD, ...body, ''].join('\n'), stderr: '' })
    const page = await runCli(['--root', root, 'show', 'ai', '--from', '0'])
    expect(page.code, page.stderr).toBe(0)
    expect(page.stdout.split('\n').slice(2)).toEqual(['showing seqs 0 to 4 of 5 event(s)', ...body, ''])
  })

  test('export --format md: the lone call as a message call is shown', async () => {
    const root = await stored([...start, ev(3, 'tool/call', DEPLOY), ev(4, 'turn/end', { turn: 1, reason: { kind: 'aborted' } })])
    const r = await runCli(['--root', root, 'export', 'ai', '--format', 'md'])
    expect(r).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        '# Session ai',
        '',
        '- created: 1970-01-01T00:00:01.000Z',
        '- cwd: `/p`',
        '- delegation depth: 0',
        '- events: 5',
        '',
        '## Turn 1',
        '',
        '**User:** deploy',
        '',
        'Tool call `deploy` (call-deploy):',
        '',
        '```',
        '{',
        '  "env": "production"',
        '}',
        '```',
        '',
        '*Turn ended: aborted*',
        '',
      ].join('\n'),
    })
  })

  test('killed in the tool (the turn left open): the interrupted result a repair would write follows the call line', async () => {
    const root = await stored([...start, ev(3, 'tool/call', DEPLOY)])
    const r = await runCli(['--root', root, 'show', 'ai'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.split('\n').slice(3)).toEqual([
      '',
      '── turn 1 ──',
      'user: deploy',
      '  → deploy {"env":"production"} [call-deploy]',
      '  ← [call-deploy] error: Tool call interrupted by a crash; no result was recorded. ⚠ interrupted [a repair would write this]',
      '  step 0 ends [a repair would write this]',
      '── end of turn 1 (interrupted) [a repair would write this]',
      '',
    ])
  })

  test('a tool/call a message holds, before it (AI SDK) or after it (reference host), is shown once, under the message', async () => {
    const message = ev(0, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'call-deploy', name: 'deploy', arguments: { env: 'production' } }] })
    const result = ev(0, 'tool/result', { turn: 1, step: 0, callId: 'call-deploy', content: [{ type: 'text', text: 'done' }] })
    const end = ev(0, 'turn/end', { turn: 1, reason: { kind: 'completed' } })
    const body = ['', '── turn 1 ──', 'user: deploy', 'assistant', '  → deploy {"env":"production"} [call-deploy]', '  ← [call-deploy] done', '── end of turn 1 (completed)', '']
    for (const order of [
      [ev(0, 'tool/call', DEPLOY), message, result],
      [message, ev(0, 'tool/call', DEPLOY), result],
    ]) {
      const events = [...start, ...order, end].map((e, seq) => ({ ...e, seq, time: 1_000 + seq }))
      const root = await stored(events)
      expect(await runCli(['--root', root, 'show', 'ai'])).toEqual({ code: 0, stdout: [...HEAD, ...body].join('\n'), stderr: '' })
      const md = await runCli(['--root', root, 'export', 'ai', '--format', 'md'])
      expect(md.stdout.split('Tool call `deploy`').length - 1).toBe(1)
    }
  })
})
