import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { SessionEvent } from '../../src/index.js'

export const HEADER = (id: string, extra = '') =>
  `{"type":"session","version":0,"id":"${id}","createdAt":1000${extra},"delegationDepth":0}\n`

export const line = (e: SessionEvent) => `${JSON.stringify(e)}\n`

/** Writes a log by hand under `<root>/_no-cwd/<id>.jsonl` (ids here need no escaping). */
export async function writeRawLog(root: string, id: string, content: string | Buffer): Promise<string> {
  const dir = join(root, '_no-cwd')
  await mkdir(dir, { recursive: true })
  const path = join(dir, `${id}.jsonl`)
  await writeFile(path, content)
  return path
}

export const bytesOf = (path: string) => readFile(path)
