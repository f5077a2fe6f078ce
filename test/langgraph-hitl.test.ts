// Human in the loop across processes: one process runs the graph to its interrupt() and exits;
// another resumes it with Command({ resume }) and the graph completes. Over JSONL and PostgreSQL.
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runChild } from './helpers/langgraph-child.js'
import { freshRoot } from './helpers/langgraph-checkpoints.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('lg_hitl')
const cleanup: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of cleanup) await c()
  if (url) await dropSchemas(url, [schema])
})

async function interruptThenResume(backend: string, trace: string) {
  const first = await runChild(['hitl-start', backend, 'hitl-thread', trace])
  expect(first.error).toBeUndefined()
  expect(first.done?.interrupts).toEqual([{ question: 'Deploy to production?' }])
  expect(first.done?.messages.map((m) => m.type)).toEqual(['human', 'ai'])
  const second = await runChild(['hitl-resume', backend, 'hitl-thread', trace, 'yes'])
  expect(second.error).toBeUndefined()
  expect(second.done?.approved).toBe('yes')
  expect(second.done?.interrupts).toEqual([])
  expect(second.done?.messages.map((m) => [m.type, m.content])).toEqual([
    ['human', 'Deploy to production.'],
    ['ai', ''],
    ['tool', 'deployed to production'],
    ['ai', 'Done: deployed to production'],
  ])
  const ran = (await readFile(trace, 'utf8')).trimEnd().split('\n')
  // The interrupted node runs again on resume (LangGraph's rule); the answer is seen once.
  expect(ran.filter((r) => r === 'approve')).toHaveLength(2)
  expect(ran.filter((r) => r.startsWith('approved:'))).toEqual(['approved:yes'])
  expect(ran.filter((r) => r === 'deploy')).toHaveLength(1)
}

describe('interrupt() in one process, Command({ resume }) in another', () => {
  it('over the JSONL backend', async () => {
    const root = await freshRoot()
    const trace = `${root}.trace`
    cleanup.push(() => rm(root, { recursive: true, force: true }), () => rm(trace, { force: true }))
    await interruptThenResume(`jsonl:${root}`, trace)
  })

  it.skipIf(!url)('over the PostgreSQL backend', async () => {
    const root = await freshRoot()
    const trace = join(root, 'trace')
    cleanup.push(() => rm(root, { recursive: true, force: true }))
    await interruptThenResume(`postgres:${url}#${schema}`, trace)
  })
})
