// Threads written by the saver are sessions of the package: session-jsonl ls, verify, show,
// copy (to another root and to PostgreSQL and back), rm and prune work on them, and a copied
// thread is read by a saver over the target as it was written.
import { execFile } from 'node:child_process'
import { readFile, rm, utimes } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { checkpoint, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))
const cli = async (...args: string[]) => (await promisify(execFile)(process.execPath, [CLI, ...args])).stdout
const url = pgUrl()
const schema = freshSchema('lg_cli')
const made: string[] = []
afterAll(async () => {
  for (const r of made) await rm(r, { recursive: true, force: true })
  if (url) await dropSchemas(url, [schema])
})

async function writtenThreads() {
  const root = await freshRoot()
  made.push(root)
  const persistence = createJsonlPersistence({ root })
  const saver = new SessionCheckpointSaver({ persistence })
  const first = checkpoint({ messages: ['hello'] })
  const cfg = await saver.put(thread('chat-1'), first, meta(-1, 'input'), { messages: 1 })
  await saver.putWrites(cfg, [['messages', ['hello', 'world']], ['__interrupt__', { question: 'Go on?' }]], 'agent-task', '~__pregel_pull, agent')
  await saver.put(cfg, checkpoint({ messages: ['hello', 'world'] }, { messages: 2 }), meta(0), { messages: 2 })
  await saver.put(thread('chat-2'), checkpoint({ n: 1 }), meta(0), { n: 1 })
  const tuple = await saver.getTuple(thread('chat-1'))
  await saver.close()
  return { root, persistence, tuple }
}

describe('the CLI on threads', () => {
  it('ls lists them, verify finds them ok, show renders checkpoints and writes', async () => {
    const { root } = await writtenThreads()
    const ls = JSON.parse(await cli('ls', '--root', root, '--json')) as { sessions: { meta: { id: string; langgraphThreadId: string } }[] }
    expect(ls.sessions.map((s) => [s.meta.id, s.meta.langgraphThreadId]).sort()).toEqual([
      ['langgraph:chat-1', 'chat-1'],
      ['langgraph:chat-2', 'chat-2'],
    ])
    const verify = JSON.parse(await cli('verify', '--root', root, '--json')) as { logs: { status: string }[] }
    expect(verify.logs.map((l) => l.status)).toEqual(['ok', 'ok'])
    const shown = await cli('show', 'langgraph:chat-1', '--root', root)
    expect(shown).toMatch(/◆ checkpoint \S+ {2}step -1 \(input\)/)
    expect(shown).toContain('messages @1 = ["hello"]')
    expect(shown).toContain('↳ agent wrote to')
    expect(shown).toContain('interrupt: {"question":"Go on?"}')
    expect(shown).toMatch(/step 0 \(loop\) {2}after \S+/)
    const md = await cli('export', 'langgraph:chat-1', '--root', root, '--format', 'md')
    expect(md).toContain('**↳ agent wrote to')
  })

  it('copy gives another root the same lines, which a saver there reads as written', async () => {
    const { root, tuple } = await writtenThreads()
    const target = await freshRoot()
    made.push(target)
    await cli('copy', '--all', '--root', root, '--to', target)
    const path = (r: string) => createJsonlPersistence({ root: r }).locate({ id: 'langgraph:chat-1', createdAt: 0, delegationDepth: 0 }).path
    expect(await readFile(path(target), 'utf8')).toBe(await readFile(path(root), 'utf8'))
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: target }) })
    expect(await saver.getTuple(thread('chat-1'))).toEqual(tuple)
    await saver.close()
  })

  it.skipIf(!url)('copy to PostgreSQL and back: a saver over PostgreSQL reads the thread as written', async () => {
    const { root, tuple } = await writtenThreads()
    const pgRoot = `${url}${url!.includes('?') ? '&' : '?'}schema=${schema}`
    await cli('copy', 'langgraph:chat-1', '--root', root, '--to', pgRoot)
    const pg = createPostgresPersistence({ connectionString: url!, schema, poolSize: 1 })
    const saver = new SessionCheckpointSaver({ persistence: pg })
    expect(await saver.getTuple(thread('chat-1'))).toEqual(tuple)
    await saver.close()
    await pg.end()
    const back = await freshRoot()
    made.push(back)
    await cli('copy', 'langgraph:chat-1', '--root', pgRoot, '--to', back)
    const path = (r: string) => createJsonlPersistence({ root: r }).locate({ id: 'langgraph:chat-1', createdAt: 0, delegationDepth: 0 }).path
    expect(await readFile(path(back), 'utf8')).toBe(await readFile(path(root), 'utf8'))
  })

  it('prune removes a thread last written before the cutoff, rm another; a saver then finds neither', async () => {
    const { root, persistence } = await writtenThreads()
    const old = Date.now() / 1000 - 40 * 86_400
    const p1 = persistence.locate({ id: 'langgraph:chat-1', createdAt: 0, delegationDepth: 0 })
    if (p1.kind !== 'jsonl') throw new Error('expected a JSONL location')
    await utimes(p1.path, old, old)
    await cli('prune', '--older-than', '30d', '--root', root)
    await cli('rm', 'langgraph:chat-2', '--root', root)
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    expect(await saver.getTuple(thread('chat-1'))).toBeUndefined()
    expect(await saver.getTuple(thread('chat-2'))).toBeUndefined()
    const all = []
    for await (const t of saver.list({})) all.push(t)
    expect(all).toEqual([])
    await saver.close()
  })
})
