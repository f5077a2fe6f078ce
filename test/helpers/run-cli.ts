import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { EventEmitter, once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

/**
 * The built binary: `dist/cli/main.js` (build dist first), or the one `SESSION_JSONL_CLI` names
 * (a build of its own, e.g. `tsc --outDir test/.work/cli-dist`, which a concurrent `npm run
 * build` that empties dist/ does not break).
 */
export const CLI_BIN = process.env.SESSION_JSONL_CLI ?? fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url))

/** Runs the built `session-jsonl` binary without colours; never throws. */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI_BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, maxBuffer: 256 * 1024 * 1024 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** A running `session-jsonl` (a `tail -f`, say) whose output a test reads line by line. */
export interface RunningCli {
  readonly child: ChildProcess
  /** The complete lines written to stdout so far. */
  readonly lines: string[]
  stderr(): string
  /** Resolves once stdout has at least `n` lines; rejects after `ms` (with what was read) or if the process ends first. */
  waitForLines(n: number, ms?: number): Promise<string[]>
  /** Resolves with the exit code (or the signal) once the process has ended; rejects after `ms`. */
  exit(ms?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export function startCli(args: string[], env: Record<string, string> = {}): RunningCli {
  const child = spawn(process.execPath, [CLI_BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  const lines: string[] = []
  let partial = ''
  let err = ''
  const changed = new EventEmitter()
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n')
    partial = parts.pop()!
    lines.push(...parts)
    changed.emit('change')
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
  })
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  let done = false
  void ended.then(() => {
    done = true
    changed.emit('change')
  })
  const within = <T>(ms: number, what: string, p: Promise<T>) =>
    Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} within ${ms} ms; stdout so far: ${JSON.stringify(lines)}; stderr: ${err}`)), ms).unref())])
  return {
    child,
    lines,
    stderr: () => err,
    waitForLines: (n, ms = 10_000) =>
      within(
        ms,
        `no ${n} line(s)`,
        new Promise<string[]>((resolve, reject) => {
          const check = () => {
            if (lines.length >= n) {
              changed.off('change', check)
              resolve(lines.slice())
            } else if (done) {
              changed.off('change', check)
              reject(new Error(`the process ended after ${lines.length} line(s): ${JSON.stringify(lines)}; stderr: ${err}`))
            }
          }
          changed.on('change', check)
          check()
        }),
      ),
    exit: (ms = 10_000) => within(ms, 'no exit', ended),
  }
}

/**
 * Runs the built binary under a heap limit (`--max-old-space-size`), for the bounded-memory
 * tests: its exit, its stdout (into `stdoutFd` when given, so a large output never enters this
 * process's memory) and the start of its stderr.
 */
export async function runCliWithHeap(
  heapMb: number,
  args: string[],
  stdoutFd?: number,
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, CLI_BIN, ...args], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s.slice(0, 4000)))
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null]
  return { code, signal, stdout, stderr }
}
