import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'

const WORKER = fileURLToPath(new URL('../fixtures/lock-worker.mjs', import.meta.url))

/** A writer in another process holding `id`'s lock (the lock worker: it loads, appends a turn, and holds until its stdin ends). */
export async function lockHolder(root: string, id: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [WORKER, root, id, 'hold-until-eof', '0'], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>))
      child.once('exit', (code, signal) => reject(new Error(`lock worker exited ${code ?? signal}`)))
    })
    expect(line).toMatchObject({ held: true, pid: child.pid })
    return child
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
}
