import { writeFile, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { headerLine } from '../src/session/meta.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

test('tree shows every listed session, those whose parent links form a loop too (each loop from its earliest session)', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('plain', { createdAt: 1 }))
  await p.append('plain', turn(0, 1))
  await p.closeAll()
  // Headers a writer could have made: a session naming itself as parent, two naming each other.
  const bucket = join(root, '_no-cwd')
  await mkdir(bucket, { recursive: true })
  for (const [id, parent, createdAt] of [['self', 'self', 2], ['ca', 'cb', 3], ['cb', 'ca', 4]] as const) {
    await writeFile(join(bucket, `${id}.jsonl`), headerLine({ id, createdAt, delegationDepth: 1, parentSession: parent }, 1))
  }
  const r = await runCli(['--root', root, 'tree'])
  expect(r.code).toBe(0)
  // Each loop once around, ending at the session it started from (which is not followed again).
  expect(r.stdout).toBe(
    'plain\nself (delegated, depth 1)\n└─ self (delegated, depth 1)\nca (delegated, depth 1)\n└─ cb (delegated, depth 1)\n   └─ ca (delegated, depth 1)\n',
  )
  const json = JSON.parse((await runCli(['--root', root, 'tree', '--json'])).stdout) as { id: string; children: { id: string }[] }[]
  expect(json.map((n) => [n.id, n.children.map((c) => c.id)])).toEqual([['plain', []], ['self', ['self']], ['ca', ['cb']]])
})
