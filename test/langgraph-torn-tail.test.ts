// Why each append is a turn: a crash that tears the last append leaves a torn tail that repair
// cuts (and closes, if the checkpoint line itself survived), and the thread goes on; damage to an
// earlier line is behind a commit point, so it is refused (E_CORRUPT), never silently cut with
// every checkpoint after it.
import { readFile, rm, truncate, writeFile } from 'node:fs/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import { checkpoint, codeOf, freshRoot, logEvents, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

async function threeCheckpoints() {
  const root = await freshRoot()
  roots.push(root)
  const persistence = createJsonlPersistence({ root })
  const saver = new SessionCheckpointSaver({ persistence })
  const ids: string[] = []
  let cfg = thread('torn')
  for (let i = 1; i <= 3; i++) {
    const c = checkpoint({ n: i }, { n: i })
    cfg = await saver.put(cfg, c, meta(i), { n: i })
    ids.push(c.id)
  }
  await saver.close()
  const path = persistence.locate({ id: 'langgraph:torn', createdAt: 0, delegationDepth: 0 }).path
  return { root, path, ids }
}

describe('a thread log after a crash', () => {
  it('a torn last append (its checkpoint line cut mid-way) is cut; the thread goes on from the one before', async () => {
    const { root, path, ids } = await threeCheckpoints()
    const text = await readFile(path, 'utf8')
    const lastCheckpointLine = text.lastIndexOf('{"seq":7,')
    await truncate(path, Buffer.byteLength(text.slice(0, lastCheckpointLine + 40)))
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    const latest = await saver.getTuple(thread('torn'))
    expect(latest?.checkpoint.id).toBe(ids[1])
    // The repair closed the turn the torn append had opened; the next put continues after it.
    const c4 = checkpoint({ n: 4 }, { n: 4 })
    await saver.put(latest!.config, c4, meta(4), { n: 4 })
    expect((await saver.getTuple(thread('torn')))?.checkpoint).toEqual(c4)
    await saver.close()
    const events = await logEvents(path)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    expect(events.slice(6, 8).map((e) => [e.type, e.data])).toEqual([
      ['turn/start', { turn: 3 }],
      ['turn/end', { turn: 3, reason: { kind: 'interrupted' } }],
    ])
  })

  it('an append torn after its checkpoint line keeps that checkpoint (it was complete) and closes its turn', async () => {
    const { root, path, ids } = await threeCheckpoints()
    const text = await readFile(path, 'utf8')
    await truncate(path, Buffer.byteLength(text.slice(0, text.lastIndexOf('{"seq":8,') + 10)))
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    expect((await saver.getTuple(thread('torn')))?.checkpoint.id).toBe(ids[2])
    await saver.close()
    expect((await logEvents(path)).at(-1)).toMatchObject({ seq: 8, type: 'turn/end', data: { reason: { kind: 'interrupted' } } })
  })

  it('damage to an earlier, committed append is refused with E_CORRUPT and the log left as it was', async () => {
    const { root, path } = await threeCheckpoints()
    const text = await readFile(path, 'utf8')
    const at = text.indexOf('"langgraph/checkpoint"') // the first checkpoint's line
    const damaged = `${text.slice(0, at)}"langgraph/checkpoint"}}}}${text.slice(at + 22)}`
    await writeFile(path, damaged)
    const saver = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }) })
    expect(await codeOf(saver.getTuple(thread('torn')))).toBe('E_CORRUPT')
    expect(await codeOf(saver.put(thread('torn'), checkpoint(), meta(9), {}))).toBe('E_CORRUPT')
    expect(await readFile(path, 'utf8')).toBe(damaged)
    await saver.close()
  })
})
