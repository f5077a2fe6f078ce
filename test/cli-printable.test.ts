import { readFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { makeStyle, printable } from '../src/cli/render.js'
import { renderTranscript } from '../src/cli/transcript.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { LoadedSession } from '../src/index.js'
import { ev, meta } from './helpers/events.js'
import { runCli, startCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

const ESC = '\u001b'
// Set the window title, clear the screen, write the clipboard (OSC 52), hide text, overwrite
// what was printed (\r, \b), a C1 CSI, DEL and a right-to-left override.
const EVIL = `innocent${ESC}]0;PWNED\u0007${ESC}[2J${ESC}]52;c;cm0gLXJmIH4=\u0007 x${ESC}[8mHIDDEN a\rb\bc \u009b31m \u007f \u202eevil\u2069`
const ID = `id-${ESC}[31mRED`
const CWD = `/tmp/${ESC}[1mcwd\u202e`
/** What the terminal would act on rather than show, as the views must never print it. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

async function evilRoot(): Promise<string> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta(ID, { cwd: CWD }))
  await p.append(ID, [
    ev(0, 'turn/start', { turn: 1 }),
    ev(1, 'user/message', { content: EVIL }),
    ev(2, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: EVIL }, { type: 'tool-call', callId: `c${ESC}[2J`, name: `run${ESC}]0;T\u0007`, arguments: { cmd: `\u009b2J\u202e` } }] }),
    ev(3, 'tool/result', { turn: 1, step: 0, callId: `c${ESC}[2J`, content: [{ type: 'text', text: EVIL }] }),
    ev(4, 'turn/end', { turn: 1, reason: { kind: `completed${ESC}[8m` } }),
  ])
  await p.fork(ID, { id: `child${ESC}]0;T\u0007`, seedLength: 5 })
  await p.closeAll()
  return root
}

describe('printable: stored text cannot drive the terminal', () => {
  test('controls but \\n and \\t, DEL, C1 and bidi overrides become visible escapes; everything else is kept', () => {
    expect(printable(`a${ESC}[2Jb\u0007\r\b\u007f\u0085\u009f\u202a\u202e\u2066\u2069\n\tž→`)).toBe(
      'a\\x1b[2Jb\\x07\\r\\x08\\x7f\\x85\\x9f\\u202a\\u202e\\u2066\\u2069\n\tž→',
    )
    expect(printable('a\nb\tc', true)).toBe('a\\nb\\tc')
  })

  test('the data is escaped before the CLI styles it: its own colours still reach the terminal', () => {
    const session: LoadedSession = {
      meta: meta(ID),
      events: [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: `hi${ESC}[8m` })],
      repair: undefined,
    } as unknown as LoadedSession
    const out = renderTranscript(session, makeStyle(true))
    expect(out).toContain(`${ESC}[1msession id-\\x1b[31mRED${ESC}[22m`)
    expect(out).toContain(`${ESC}[36muser${ESC}[39m: hi\\x1b[8m\n`)
  })

  test.each([['ls'], ['show', 'id-'], ['tail', 'id-'], ['tree'], ['verify'], ['export', 'id-', '--format', 'md'], ['show', 'id-', '--last', '3'], ['ls', '--limit', '5']])(
    '%s … prints ids, cwd and content with visible escapes, never the raw bytes',
    async (...args) => {
      const root = await evilRoot()
      const r = await runCli(['--root', root, ...args])
      expect(r.stderr).toBe('')
      expect(r.code).toBe(0)
      expect(r.stdout).not.toMatch(RAW)
      expect(r.stdout).toContain(args[0] === 'ls' || args[0] === 'tree' || args[0] === 'verify' ? 'id-\\x1b[31mRED' : '\\x1b]0;PWNED\\x07')
    },
  )

  test('show and export show every escape, \\r and \\b included; ls and tree escape ids and cwd', async () => {
    const root = await evilRoot()
    const show = await runCli(['--root', root, 'show', 'id-'])
    expect(show.stdout).toContain('user: innocent\\x1b]0;PWNED\\x07\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07 x\\x1b[8mHIDDEN a\\rb\\x08c \\x9b31m \\x7f \\u202eevil\\u2069\n')
    expect(show.stdout).toContain('cwd /tmp/\\x1b[1mcwd\\u202e')
    expect(show.stdout).toContain('→ run\\x1b]0;T\\x07 {"cmd":"\\x9b2J\\u202e"} [c\\x1b[2J]')
    expect(show.stdout).toContain('end of turn 1 (completed\\x1b[8m)')
    const md = await runCli(['--root', root, 'export', 'id-', '--format', 'md'])
    expect(md.stdout).toContain('# Session id-\\x1b[31mRED\n')
    expect(md.stdout).toContain('x\\x1b[8mHIDDEN a\\rb\\x08c')
    const ls = await runCli(['--root', root, 'ls'])
    expect(ls.stdout).toMatch(/^id-\\x1b\[31mRED +.* \/tmp\/\\x1b\[1mcwd\\u202e /m)
    expect(ls.stdout).toContain('fork of id-\\x1b[31mRED@5')
    const tree = await runCli(['--root', root, 'tree'])
    expect(tree.stdout).toBe('id-\\x1b[31mRED\n└─ child\\x1b]0;T\\x07 (fork at 5)\n')
  })

  test('tail -f: a followed event and the deletion notice on stderr are escaped too', async () => {
    const root = await evilRoot()
    const p = createJsonlPersistence({ root })
    await p.load(ID)
    const tail = startCli(['--root', root, 'tail', 'id-', '-n', '1', '-f'])
    try {
      await tail.waitForLines(1)
      await p.append(ID, [ev(5, 'turn/start', { turn: 2 }), ev(6, 'user/message', { content: `more${ESC}[2J` })])
      expect((await tail.waitForLines(3)).slice(1)).toEqual(['#5 ── turn 2 ──', '#6 user: more\\x1b[2J'])
      await p.closeAll()
      await createJsonlPersistence({ root }).delete(ID)
      expect(await tail.exit()).toEqual({ code: 0, signal: null })
      expect(tail.stderr()).toBe("session 'id-\\x1b[31mRED' was deleted; stopped following\n")
    } finally {
      tail.child.kill()
      await p.closeAll()
    }
  })

  test('--json and show --raw keep the stored text as it is', async () => {
    const root = await evilRoot()
    const json = await runCli(['--root', root, 'show', 'id-', '--json'])
    const parsed = JSON.parse(json.stdout) as { meta: { id: string; cwd: string }; events: { data: { content: unknown } }[] }
    expect(parsed.meta).toMatchObject({ id: ID, cwd: CWD })
    expect(parsed.events[1]!.data.content).toBe(EVIL)
    const ls = JSON.parse((await runCli(['--root', root, 'ls', '--json'])).stdout) as { sessions: { meta: { id: string } }[] }
    expect(ls.sessions.map((s) => s.meta.id).sort()).toEqual([`child${ESC}]0;T\u0007`, ID].sort())
    const listed = createJsonlPersistence({ root })
    const path = (await listed.list()).find((l) => l.meta.id === ID)!.location
    const raw = await runCli(['--root', root, 'show', 'id-', '--raw'])
    expect(raw.stdout).toBe(await readFile((path as { path: string }).path, 'utf8'))
  })
})

test('copy and export --out print the operator-given target path escaped too (they printed it raw)', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('s'))
  await p.append('s', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'turn/end', { turn: 1, reason: { kind: 'completed' } })])
  await p.closeAll()
  const evil = `${await tmpRoot()}/to${ESC}[31m\u202e\r`
  const copied = await runCli(['--root', root, 'copy', '--all', '--to', evil])
  expect(copied.code).toBe(0)
  expect(copied.stdout + copied.stderr).not.toMatch(RAW)
  expect(copied.stdout).toContain('to\\x1b[31m\\u202e\\r')
  const out = `${evil}.md`
  const exported = await runCli(['--root', root, 'export', 's', '--format', 'md', '--out', out])
  expect(exported.code).toBe(0)
  expect(exported.stdout + exported.stderr).not.toMatch(RAW)
  expect(exported.stderr).toContain('wrote ')
  expect(exported.stderr).toContain('to\\x1b[31m\\u202e\\r.md')
  expect(await readFile(out, 'utf8')).toContain('# Session s')
})
