import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { runCliWithHeap } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.5: one line of 64 MiB loads in at most 4× its size, and `copy` of a session holding one
// must too. A JSONL→JSONL copy checks the log as a load does and copies the bytes it checked: it
// needs a heap of about 70–80 MiB for this line. The old copy handed the line out as a string and
// checked it again (its text cut of the checksum, parsed) and joined it with `\n` to write it:
// it needed about 140 MiB of heap and more than 5× the line in all (docs/benchmarks.md).
const HEAP_MB = 104
const TEXT = 64 * 1024 * 1024 - 200 // the line is a little longer, under the 64 MiB limit

describe.each([0, 1] as const)(`copy of a session holding one 64 MiB line with a ${HEAP_MB} MiB heap (version %i)`, (formatVersion) => {
  test('the CLI exits 0 and the copy holds the same bytes', async () => {
    const from = await tmpRoot()
    const to = await tmpRoot()
    const p = createJsonlPersistence({ root: from, sync: 'none', formatVersion })
    await p.create({ id: 'huge', createdAt: 1, delegationDepth: 0 })
    // A flat string of one-byte characters, as text decoded from bytes is.
    const text = Buffer.alloc(TEXT, 'r').toString('latin1')
    await p.append('huge', [
      { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
      { seq: 1, type: 'tool/result', time: 2, data: { callId: 'c', content: [{ type: 'text', text }] } },
      { seq: 2, type: 'turn/end', time: 3, data: { turn: 1, reason: { kind: 'completed' } } },
    ])
    await p.closeAll()
    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', from, 'copy', 'huge', '--to', to, '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    expect(JSON.parse(stdout).copied).toEqual([{ id: 'huge', events: 3 }])
    const [original, copied] = await Promise.all([readFile(join(from, '_no-cwd', 'huge.jsonl')), readFile(join(to, '_no-cwd', 'huge.jsonl'))])
    expect(copied.length).toBe(original.length)
    expect(copied.equals(original)).toBe(true)
  }, 60_000)
})
