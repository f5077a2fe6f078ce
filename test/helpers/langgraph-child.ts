// Runs test/fixtures/langgraph-run.mjs in a child process and collects what it reports.
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const RUNNER = fileURLToPath(new URL('../fixtures/langgraph-run.mjs', import.meta.url))

export interface Summary {
  messages: { type: string; content: unknown; calls: string[] }[]
  notes: string[]
  approved: string | null
  interrupts: unknown[]
}

export interface ChildReport {
  puts: string[]
  writes: { writes: string; task: string; channels: string[] }[]
  done?: Summary
  error?: { code?: string; message: string }
  signal: NodeJS.Signals | null
  stderr: string
}

export type Message = Record<string, unknown>

/**
 * Runs one mode of the runner; `onMessage` may act on the child (kill it, tell it to release).
 * Resolves when the child exits.
 */
export function runChild(
  args: string[],
  onMessage?: (m: Message, child: ChildProcess) => void,
): Promise<ChildReport> {
  return new Promise((resolve, reject) => {
    const child = fork(RUNNER, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] })
    const report: ChildReport = { puts: [], writes: [], signal: null, stderr: '' }
    child.stderr?.on('data', (d: Buffer) => (report.stderr += d.toString()))
    child.on('message', (m: Message) => {
      if (typeof m.put === 'string') report.puts.push(m.put)
      if (typeof m.writes === 'string') report.writes.push(m as unknown as ChildReport['writes'][number])
      if (m.done) report.done = m.done as Summary
      if (m.error) report.error = m.error as ChildReport['error']
      onMessage?.(m, child)
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      report.signal = signal
      resolve(report)
    })
  })
}
