import { execFile } from 'node:child_process'
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
