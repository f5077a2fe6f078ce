// A real StateGraph (scripted chat model, a ToolNode, a parallel node) in a child process,
// SIGKILLed inside its tool with durability 'sync'. A new process resumes the thread from the
// last checkpoint and the graph completes; every put and putWrites that had resolved is there,
// and the parallel node whose writes were durable does not run again. Over JSONL and PostgreSQL.
import { execFile } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { type ChildReport, runChild } from './helpers/langgraph-child.js'
import { freshRoot } from './helpers/langgraph-checkpoints.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))
const cli = async (...args: string[]) => (await promisify(execFile)(process.execPath, [CLI, ...args])).stdout
const url = pgUrl()
const schema = freshSchema('lg_crash')
afterAll(async () => {
  if (url) await dropSchemas(url, [schema])
})

interface Backend {
  /** The runner's backend argument. */
  arg: string
  /** The CLI's --root. */
  root: string
  open(): SessionPersistence & { closeAll(): Promise<void>; end?: () => Promise<void> }
}

const backends: [string, () => Promise<Backend>, boolean][] = [
  [
    'JSONL',
    async () => {
      const root = await freshRoot()
      return { arg: `jsonl:${root}`, root, open: () => createJsonlPersistence({ root }) }
    },
    false,
  ],
  [
    'PostgreSQL',
    async () => ({
      arg: `postgres:${url}#${schema}`,
      root: `${url}${url?.includes('?') ? '&' : '?'}schema=${schema}`,
      open: () => createPostgresPersistence({ connectionString: url!, schema, poolSize: 1 }),
    }),
    !url,
  ],
]

describe.each(backends)('a LangGraph run SIGKILLed inside a tool, over %s', (_name, makeBackend, skip) => {
  let backend: Backend
  let traceDir: string
  let trace: string
  let crashed: ChildReport
  beforeAll(async () => {
    if (skip) return
    backend = await makeBackend()
    traceDir = await freshRoot() // the trace file in a directory of its own, removed after (an empty one was left behind)
    trace = join(traceDir, 'trace')
    crashed = await runChild(['crash', backend.arg, 'deploy-thread', trace], (m, child) => {
      if (m.inTool === 'deploy') child.kill('SIGKILL')
    })
  })
  afterAll(async () => {
    if (skip) return
    if (backend.arg.startsWith('jsonl:')) await rm(backend.root, { recursive: true, force: true })
    await rm(traceDir, { recursive: true, force: true })
  })

  it.skipIf(skip)('was killed in the tool, after some puts and writes had resolved', () => {
    expect(crashed.signal).toBe('SIGKILL')
    expect(crashed.error).toBeUndefined()
    expect(crashed.puts.length).toBeGreaterThanOrEqual(3)
    expect(crashed.writes.some((w) => w.channels.includes('notes'))).toBe(true)
  })

  it.skipIf(skip)('lost nothing a resolved put or putWrites covered', async () => {
    const persistence = backend.open()
    const saver = new SessionCheckpointSaver({ persistence })
    const listed = new Map<string, Awaited<ReturnType<typeof saver.getTuple>>>()
    for await (const t of saver.list({ configurable: { thread_id: 'deploy-thread' } })) listed.set(t.checkpoint.id, t)
    for (const id of crashed.puts) expect(listed.has(id)).toBe(true)
    for (const w of crashed.writes) {
      const stored = listed.get(w.writes)?.pendingWrites?.filter(([task]) => task === w.task).map(([, channel]) => channel)
      expect(stored).toEqual(expect.arrayContaining(w.channels))
    }
    // The latest checkpoint is the one the tools were running from: its task is still due.
    const latest = await saver.getTuple({ configurable: { thread_id: 'deploy-thread' } })
    expect(latest?.checkpoint.id).toBe(crashed.puts.at(-1))
    expect(latest?.metadata?.step).toBe(1)
    await saver.close()
    await persistence.closeAll()
    await persistence.end?.()
    const verify = JSON.parse(await cli('verify', '--root', backend.root, '--json')) as { logs: { status: string }[] }
    expect(verify.logs.map((l) => l.status)).toEqual(['ok'])
  })

  it.skipIf(skip)('resumes in a new process from the last checkpoint and completes, the parallel node not run again', async () => {
    const resumed = await runChild(['resume', backend.arg, 'deploy-thread', trace])
    expect(resumed.error).toBeUndefined()
    expect(resumed.done?.messages.map((m) => [m.type, m.content, m.calls])).toEqual([
      ['human', 'Deploy to production.', []],
      ['ai', '', ['deploy']],
      ['tool', 'deployed to production', []],
      ['ai', 'Done: deployed to production', []],
    ])
    expect(resumed.done?.notes).toEqual(['deploy requested'])
    const ran = (await readFile(trace, 'utf8')).trimEnd().split('\n')
    expect(ran.filter((r) => r === 'notify')).toHaveLength(1)
    expect(ran.filter((r) => r === 'deploy')).toHaveLength(2)
    expect(ran.filter((r) => r === 'agent')).toHaveLength(2)
    // The resumed run added checkpoints after the crashed run's, to the same log.
    expect(resumed.puts.length).toBeGreaterThan(0)
    const shown = await cli('show', 'langgraph:deploy-thread', '--root', backend.root)
    expect(shown).toContain('↳ notify wrote to')
    expect(shown).toContain('tool: deployed to production')
  })
})
