// A store's sessions are sessions of the package: the events it writes (the 2.1 vocabulary
// where an entry carries a message), the model history they give, and the CLI on them
// (ls, show, verify, export, prune, copy). Needs `npm run build` (the CLI runs from dist/).
import { readFile, stat, utimes } from 'node:fs/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { createSessionStore } from '../src/adapters/claude-agent-sdk/index.js'
import { sessionIdOf } from '../src/adapters/claude-agent-sdk/session-key.js'
import { createJsonlPersistence, toModelHistory } from '../src/index.js'
import { jsonlBackend } from './helpers/claude-agent-sdk-backends.js'
import { runCli } from './helpers/run-cli.js'
import { ODD_ENTRIES, PROJECT_KEY, SESSION_ID, TURN_ENTRIES } from './fixtures/claude-agent-sdk-entries.js'

const key = { projectKey: PROJECT_KEY, sessionId: SESSION_ID }
const id = sessionIdOf(key)
const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

async function written(entries = [...TURN_ENTRIES, ...ODD_ENTRIES]) {
  const b = await jsonlBackend()
  cleanups.push(b.cleanup)
  const store = createSessionStore({ persistence: b.persistence })
  cleanups.push(() => store.close())
  await store.append(key, entries)
  await store.close()
  return { ...b, store }
}

describe('the events a store writes', () => {
  it('one event per entry: the vocabulary for messages, tool uses and single results, claude/entry for the rest, the entry verbatim beside it', async () => {
    const { persistence } = await written()
    const { meta, events } = await persistence.inspect(id)
    expect(events.map((e) => [e.type, e.ignorable ?? false])).toEqual([
      ['claude/entry', true], // queue-operation
      ['user/message', false],
      ['claude/entry', true], // attachment
      ['assistant/message', false],
      ['claude/entry', true], // last-prompt
      ['tool/result', false],
      ['assistant/message', false],
      ['claude/entry', true], // cost-state
      ['assistant/message', false],
      ['claude/entry', true], // two results in one entry
      ['claude/entry', true], // system
    ])
    expect(events.map((e) => (e as Record<string, unknown>).claudeEntry)).toEqual([...TURN_ENTRIES, ...ODD_ENTRIES])
    expect(events[3]?.data).toEqual({ turn: 0, step: 0, content: [{ type: 'tool-call', callId: 'toolu_01', name: 'Bash', arguments: { command: 'echo hi', description: 'say hi' } }] })
    expect(events[5]?.data).toEqual({ turn: 0, step: 0, callId: 'toolu_01', content: [{ type: 'text', text: 'hi' }] })
    expect(events[6]?.data).toEqual({ turn: 0, step: 0, content: [{ type: 'reasoning', text: 'It printed hi.' }, { type: 'text', text: 'Done: the tool answered.' }] })
    // No turn structure: nothing for repair to close, so a load never writes an event of its own.
    expect(events.some((e) => e.type.startsWith('turn/') || e.type.startsWith('step/'))).toBe(false)
    expect(meta).toMatchObject({ id, cwd: '/work/app', delegationDepth: 0, claudeAgentSdk: key })
  })

  it('give the model history of the conversation: the user, the call, its result, the answer', async () => {
    const { persistence } = await written(TURN_ENTRIES)
    const { messages } = toModelHistory((await persistence.inspect(id)).events)
    expect(messages.map((m) => [m.role, m.callId ?? null, m.content])).toEqual([
      ['user', null, [{ type: 'text', text: 'Please use the tool.' }]],
      ['assistant', null, [{ type: 'tool-call', callId: 'toolu_01', name: 'Bash', arguments: { command: 'echo hi', description: 'say hi' } }]],
      ['tool', 'toolu_01', [{ type: 'text', text: 'hi' }]],
      ['assistant', null, [{ type: 'reasoning', text: 'It printed hi.' }, { type: 'text', text: 'Done: the tool answered.' }]],
    ])
  })

  it('a subagent transcript is a session delegated from its main transcript', async () => {
    const b = await jsonlBackend()
    cleanups.push(b.cleanup)
    const store = createSessionStore({ persistence: b.persistence })
    cleanups.push(() => store.close())
    const sub = { ...key, subpath: 'subagents/agent-a1' }
    await store.append(sub, [{ type: 'user', uuid: 'x', isSidechain: true, message: { role: 'user', content: 'explore' } }])
    expect((await b.persistence.inspect(sessionIdOf(sub))).meta).toMatchObject({ parentSession: id, delegationDepth: 1, claudeAgentSdk: sub })
  })
})

describe('the CLI on a store\'s sessions', () => {
  it('ls lists it; show renders messages, the tool use and its results; verify says ok', async () => {
    const { root } = await written()
    const ls = await runCli(['ls', '--root', root, '--json'])
    expect(ls.code).toBe(0)
    expect(ls.stdout).toContain(id)
    expect(ls.stdout).toContain('/work/app')
    const show = await runCli(['show', SESSION_ID.slice(0, 8), '--root', root])
    expect(show.code, show.stderr).toBe(0)
    const out = show.stdout
    expect(out).toContain('user: Please use the tool.')
    expect(out).toMatch(/→ Bash \{"command":"echo hi","description":"say hi"\}.*\[toolu_01\]/)
    expect(out).toContain('← [toolu_01] hi')
    expect(out).toContain('assistant: Done: the tool answered.')
    // Two results in one entry, rendered by the adapter's renderer.
    expect(out).toContain('← [toolu_a] contents of a')
    expect(out).toContain('← [toolu_b] error: no such file')
    expect(out).toContain('system (compact_boundary): Conversation compacted')
    // The SDK's bookkeeping entries: one short line each, not their payload.
    expect(out).toContain('· queue-operation enqueue')
    expect(out).toContain('· attachment date')
    expect(out).toContain('· cost-state $0.0003')
    expect(out).not.toContain('toolUseResult')
    const verify = await runCli(['verify', '--root', root, '--json'])
    expect(verify.code).toBe(0)
    expect((JSON.parse(verify.stdout) as { logs: { status: string }[] }).logs.map((l) => l.status)).toEqual(['ok'])
  })

  it('export renders Markdown with the messages, the call and its results, and JSON with every event', async () => {
    const { root } = await written()
    const md = await runCli(['export', id, '--format', 'md', '--root', root])
    expect(md.code, md.stderr).toBe(0)
    expect(md.stdout).toContain('**User:** Please use the tool.')
    expect(md.stdout).toContain('Tool call `Bash` (toolu_01)')
    expect(md.stdout).toContain('Result of toolu_01:')
    expect(md.stdout).toContain('**Assistant:** Done: the tool answered.')
    expect(md.stdout).toContain('Result of toolu_b (error):')
    const json = await runCli(['export', id, '--format', 'json', '--root', root])
    expect(json.code, json.stderr).toBe(0)
    expect(json.stdout).toContain('"claudeEntry"')
    expect(json.stdout).toContain('toolUseResult')
  })

  it('copy moves it to another root byte for byte, and a store there loads the same entries', async () => {
    const { root, persistence } = await written()
    const target = await jsonlBackend()
    cleanups.push(target.cleanup)
    const copy = await runCli(['copy', '--all', '--to', target.root, '--root', root])
    expect(copy.code, copy.stderr).toBe(0)
    const from = persistence.locate({ id, createdAt: 0, delegationDepth: 0, cwd: '/work/app' })
    const to = createJsonlPersistence({ root: target.root }).locate({ id, createdAt: 0, delegationDepth: 0, cwd: '/work/app' })
    if (from.kind !== 'jsonl' || to.kind !== 'jsonl') throw new Error('jsonl locations expected')
    expect((await readFile(to.path)).equals(await readFile(from.path))).toBe(true)
    const there = createSessionStore({ persistence: target.persistence })
    cleanups.push(() => there.close())
    expect(await there.load(key)).toEqual([...TURN_ENTRIES, ...ODD_ENTRIES])
  })

  it('prune deletes it once its last write is old enough; the store then loads null and lists nothing', async () => {
    const { root, store, persistence } = await written()
    const fresh = await runCli(['prune', '--older-than', '1d', '--root', root])
    expect(fresh.code, fresh.stderr).toBe(0)
    expect(await store.load(key)).not.toBeNull()
    // Its last write three days ago, as the listing sees it (the file's mtime).
    const loc = persistence.locate({ id, createdAt: 0, delegationDepth: 0, cwd: '/work/app' })
    if (loc.kind !== 'jsonl') throw new Error('jsonl location expected')
    const old = new Date(Date.now() - 3 * 86_400_000)
    await utimes(loc.path, old, old)
    // The SDK asks for integer ms, fractional sources floored: the file's mtime as stat reads it
    // back (utimes stores seconds as a float: 474 ms may read back as 473.9998).
    const { mtimeMs } = await stat(loc.path)
    expect(Math.abs(mtimeMs - old.getTime())).toBeLessThan(1)
    expect((await store.listSessions(PROJECT_KEY)).map((s) => s.mtime)).toEqual([Math.floor(mtimeMs)])
    const dry = await runCli(['prune', '--older-than', '1d', '--dry-run', '--root', root])
    expect(dry.stdout).toContain(id)
    expect(await store.load(key)).not.toBeNull()
    const prune = await runCli(['prune', '--older-than', '1d', '--root', root])
    expect(prune.code, prune.stderr).toBe(0)
    expect(prune.stdout).toContain(id)
    expect(await store.load(key)).toBeNull()
    expect(await store.listSessions(PROJECT_KEY)).toEqual([])
  })
})
