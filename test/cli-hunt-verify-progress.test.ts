import { describe, expect, test } from 'vitest'
import type { Io } from '../src/cli/commands.js'
import { main } from '../src/cli/main.js'
import { makeStyle } from '../src/cli/render.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// docs/cli.md: "`verify` shows a progress bar on a terminal for roots with more than 50 logs".

/** The progress calls `verify` makes on a terminal (an Io with `progress`) over a root of `n` logs. */
async function progressOver(n: number): Promise<{ code: number; calls: [string, number, number][] }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  for (let i = 0; i < n; i++) {
    const id = `s${String(i).padStart(2, '0')}`
    await p.create(meta(id))
    await p.append(id, turn(0, 1))
  }
  await p.closeAll()
  const calls: [string, number, number][] = []
  const io: Io = { out: () => {}, err: () => {}, style: makeStyle(false), progress: (what, done, total) => calls.push([what, done, total]) }
  return { code: await main(['--root', root, 'verify'], {}, io), calls }
}

describe('verify progress', () => {
  test('regression: no progress bar for exactly 50 logs; one for 51', async () => {
    expect(await progressOver(50)).toEqual({ code: 0, calls: [] })
    const { code, calls } = await progressOver(51)
    expect(code).toBe(0)
    expect(calls).toHaveLength(51)
    expect(calls.map(([what, , total]) => [what, total])).toEqual(Array(51).fill(['verify', 51]))
    expect(calls.map(([, done]) => done).sort((a, b) => a - b)).toEqual(Array.from({ length: 51 }, (_, i) => i + 1))
  })
})
