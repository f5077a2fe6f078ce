// The real thing: `query()` through the SDK's bundled CLI, offline against a fake Messages API
// on loopback, with the store as `sessionStore` over the JSONL backend and over PostgreSQL.
// A two-turn session with tool uses is SIGKILLed (the whole process group: SDK and CLI) while
// the second turn's tool runs; a new process with an empty CLAUDE_CONFIG_DIR resumes from the
// store alone, and the model is sent the whole stored history. Needs `npm run build` (the child
// loads dist/) and the SDK, which the test installs into test/.work/ (skipped without a registry).
import { fork } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSessionStore, type SessionKey, type SessionStoreEntry } from '../src/adapters/claude-agent-sdk/index.js'
import { storedKeyOf } from '../src/adapters/claude-agent-sdk/session-key.js'
import { createJsonlPersistence } from '../src/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { conversationScript, type FakeAnthropic, type RequestBody, startFakeAnthropic } from './fixtures/claude-agent-sdk-fake-api.mjs'
import { ensureClaudeAgentSdk } from './helpers/claude-agent-sdk-install.mjs'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

/** The long tool's sleep, a duration no other process uses: afterAll finds it by its command line. */
const TOOL_SLEEP = `120.${process.pid}`

/** Kills the tool's sleep the SIGKILL of the agent's process group left running (Linux: /proc). */
async function killToolSleeps(): Promise<void> {
  const { readdir, readFile } = await import('node:fs/promises')
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
    if (cmdline === `sleep\0${TOOL_SLEEP}\0`) {
      try {
        process.kill(Number(pid), 'SIGKILL')
      } catch {
        // gone already
      }
    }
  }
}

const AGENT = fileURLToPath(new URL('./fixtures/claude-agent-sdk-agent.mjs', import.meta.url))
const sdk = await ensureClaudeAgentSdk()
if ('skipped' in sdk) console.log(`Claude Agent SDK query tests skipped: ${sdk.skipped}`)
const sdkEntry = 'entry' in sdk ? sdk.entry : ''

type Backend = { kind: 'jsonl'; root: string } | { kind: 'postgres'; url: string; schema: string }
type Report = { type: string; sessionId?: string; error?: string; turn?: number }

/** Starts the agent fixture as the leader of its own process group (so a kill takes the CLI and the tool too). */
function startAgent(config: object): { reports: Report[]; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>; pid: number } {
  const child = fork(AGENT, [JSON.stringify(config)], { detached: true, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
  const reports: Report[] = []
  let stderr = ''
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()))
  child.on('message', (m: Report) => reports.push(m))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, stderr })),
  )
  return { reports, exited, pid: child.pid! }
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 120_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/** The text, tool_use and tool_result blocks of a list of messages, as comparable strings. */
function blocksOf(messages: { content: unknown }[]): string[] {
  const out: string[] = []
  for (const m of messages) {
    if (typeof m.content === 'string') {
      out.push(`text:${m.content}`)
      continue
    }
    if (!Array.isArray(m.content)) continue
    for (const b of m.content as Record<string, unknown>[]) {
      if (b.type === 'text' && typeof b.text === 'string' && !b.text.trimStart().startsWith('<')) out.push(`text:${b.text}`)
      if (b.type === 'tool_use') out.push(`tool_use:${String(b.id)}`)
      if (b.type === 'tool_result') out.push(`tool_result:${String(b.tool_use_id)}`)
    }
  }
  return out
}

/** The conversation a store holds: its user and assistant entries' messages (meta entries aside). */
const storedMessages = (entries: SessionStoreEntry[]) =>
  entries.filter((e) => (e.type === 'user' || e.type === 'assistant') && !e.isMeta && typeof e.message === 'object').map((e) => e.message as { content: unknown })

const uuidCounts = (entries: SessionStoreEntry[]) => {
  const counts = new Map<string, number>()
  for (const e of entries) if (typeof e.uuid === 'string') counts.set(e.uuid, (counts.get(e.uuid) ?? 0) + 1)
  return counts
}

function scenario(name: string, makeBackend: () => Promise<{ backend: Backend; persistence: () => SessionPersistence; cleanup: () => Promise<void> }>) {
  describe.skipIf(!sdkEntry)(`a real query() with the store over ${name}`, () => {
    let fake: FakeAnthropic
    let dir: string
    let cwd: string
    let marker: string
    let made: Awaited<ReturnType<typeof makeBackend>>
    const opened: SessionPersistence[] = []
    const persistence = () => {
      const p = made.persistence()
      opened.push(p)
      return p
    }
    let sessionId = ''
    let key: SessionKey
    let atKill: SessionStoreEntry[] = []
    let killedAtRequest = 0

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'spj-claude-query-'))
      cwd = join(dir, 'project')
      await import('node:fs/promises').then((fs) => fs.mkdir(cwd))
      marker = join(dir, 'tool-is-running')
      // The CLI runs its Bash tool outside the agent's process group, so the kill below does not
      // reach the tool's sleep: its duration marks it for afterAll, which kills it.
      fake = await startFakeAnthropic({ respond: conversationScript({ longCommand: `touch ${marker} && sleep ${TOOL_SLEEP}` }) })
      made = await makeBackend()
    })

    afterAll(async () => {
      await killToolSleeps()
      await fake?.close()
      for (const p of opened) await (p as SessionPersistence & { closeAll(): Promise<void> }).closeAll()
      for (const p of opened) await (p as { end?: () => Promise<void> }).end?.()
      await made?.cleanup()
      await rm(dir, { recursive: true, force: true })
    })

    it('stores a two-turn session with tool uses as it runs; SIGKILL in the second turn\'s tool leaves the first turn whole, each entry once', async () => {
      // Its config directory inside ours: a killed process cannot remove it itself.
      const configDir = join(dir, 'config-killed')
      await import('node:fs/promises').then((fs) => fs.mkdir(configDir))
      const agent = startAgent({ sdkEntry, baseUrl: fake.url, cwd, backend: made.backend, configDir, prompts: ['Please use the tool.', 'Now run the long job.', 'unused'] })
      await until('the second turn\'s tool to run', () => existsSync(marker))
      sessionId = agent.reports.find((r) => r.type === 'init')?.sessionId ?? ''
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/)
      expect(agent.reports.filter((r) => r.type === 'result')).toHaveLength(1)
      // The first turn ended: the SDK mirrors it at the end of the turn. Wait until it has landed.
      const reader = createSessionStore({ persistence: persistence() })
      const find = async () => {
        for (const l of await opened.at(-1)!.list()) {
          const k = storedKeyOf(l.meta)
          if (k?.sessionId === sessionId && k.subpath === undefined) return k
        }
        return undefined
      }
      await until('the first turn in the store', async () => {
        const k = await find()
        const entries = k ? await reader.load(k) : null
        return !!entries && blocksOf(storedMessages(entries)).includes('text:Done: the tool answered.')
      })
      key = (await find())!
      process.kill(-agent.pid, 'SIGKILL')
      const exit = await agent.exited
      expect(exit.signal, exit.stderr).toBe('SIGKILL')
      killedAtRequest = fake.requests.length
      atKill = (await reader.load(key))!
      expect(blocksOf(storedMessages(atKill)).slice(0, 4)).toEqual([
        'text:Please use the tool.',
        'tool_use:toolu_01',
        'tool_result:toolu_01',
        'text:Done: the tool answered.',
      ])
      expect([...uuidCounts(atKill).values()].every((n) => n === 1)).toBe(true)
      expect(key.projectKey.length).toBeGreaterThan(0)
    })

    it('a new process with an empty CLAUDE_CONFIG_DIR resumes from the store alone: the model gets the whole stored history', async () => {
      expect(sessionId).not.toBe('')
      const agent = startAgent({ sdkEntry, baseUrl: fake.url, cwd, backend: made.backend, resume: sessionId, prompts: ['Did it finish?'] })
      const exit = await agent.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(agent.reports.filter((r) => r.type === 'mirror_error')).toEqual([])
      const resumed = fake.requests.slice(killedAtRequest).filter((b: RequestBody) => Array.isArray(b.tools) && b.tools.length > 0)
      expect(resumed.length).toBeGreaterThan(0)
      const sent = blocksOf(resumed[0]!.messages)
      // Every message block the store held before the crash, in order, then the new prompt.
      const held = blocksOf(storedMessages(atKill))
      expect(sent.filter((b) => held.includes(b))).toEqual(held)
      expect(sent.at(-1)).toBe('text:Did it finish?')
      // The store now holds the earlier entries unchanged, then the resumed turn; no uuid twice.
      const after = (await createSessionStore({ persistence: persistence() }).load(key))!
      expect(after.slice(0, atKill.length)).toEqual(atKill)
      expect(blocksOf(storedMessages(after))).toContain('text:Resumed: I can see the whole conversation.')
      const counts = uuidCounts(after)
      expect([...counts.entries()].filter(([, n]) => n > 1)).toEqual([])
      expect(counts.size).toBeGreaterThan(uuidCounts(atKill).size)
    })

    it('a session another store is writing: the SDK\'s appends are rejected with E_LOCKED and reported (mirror_error), nothing is interleaved', async () => {
      expect(sessionId).not.toBe('')
      const holder = createSessionStore({ persistence: persistence(), idleCloseMs: 600_000 })
      await holder.append(key, [{ type: 'custom-title', customTitle: 'held by another host', sessionId }])
      const before = (await holder.load(key))!
      const agent = startAgent({ sdkEntry, baseUrl: fake.url, cwd, backend: made.backend, resume: sessionId, prompts: ['Still there?'] })
      const exit = await agent.exited
      expect(exit.code, exit.stderr).toBe(0)
      const errors = agent.reports.filter((r) => r.type === 'mirror_error')
      expect(errors.length).toBeGreaterThan(0)
      expect(errors[0]!.error).toMatch(/^E_LOCKED: /)
      expect(await holder.load(key)).toEqual(before)
      await holder.close()
    })

    it('the SDK\'s retry: appends that fail twice, then succeed, store each entry once', async () => {
      const agent = startAgent({ sdkEntry, baseUrl: fake.url, cwd, backend: { ...made.backend, failAppends: 2 }, prompts: ['Please use the tool.'] })
      const exit = await agent.exited
      expect(exit.code, exit.stderr).toBe(0)
      expect(agent.reports.filter((r) => r.type === 'mirror_error')).toEqual([])
      const id = agent.reports.find((r) => r.type === 'init')!.sessionId!
      const entries = (await createSessionStore({ persistence: persistence() }).load({ ...key, sessionId: id }))!
      expect(blocksOf(storedMessages(entries))).toEqual(['text:Please use the tool.', 'tool_use:toolu_01', 'tool_result:toolu_01', 'text:Done: the tool answered.'])
      expect([...uuidCounts(entries).values()].every((n) => n === 1)).toBe(true)
    })
  })
}

scenario('the JSONL backend', async () => {
  const root = await mkdtemp(join(tmpdir(), 'spj-claude-root-'))
  return {
    backend: { kind: 'jsonl', root },
    persistence: () => createJsonlPersistence({ root }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  }
})

const url = pgUrl()
if (url) {
  scenario('PostgreSQL', async () => {
    const schema = freshSchema('claude_q')
    return {
      backend: { kind: 'postgres', url, schema },
      persistence: () => createPostgresPersistence({ connectionString: url, schema }),
      cleanup: () => dropSchemas(url, [schema]),
    }
  })
}
