import { main } from '../../src/cli/main.js'
import type { Io } from '../../src/cli/commands.js'
import { makeStyle } from '../../src/cli/render.js'
import { isSessionPersistenceError } from '../../src/errors.js'

/**
 * The CLI from the sources, in this process: its exit code, or the code of the package error it
 * threw (the binary prints that and exits 1), with what it wrote. Any other error (a usage
 * error, which the binary turns into exit 2) is thrown.
 */
export async function cliInProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ result: number | string; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const io: Io = { out: (s) => out.push(s), err: (s) => err.push(s), style: makeStyle(false), progress: undefined }
  try {
    return { result: await main(args, env, io), out: out.join(''), err: err.join('') }
  } catch (e) {
    if (!isSessionPersistenceError(e)) throw e
    return { result: e.code, out: out.join(''), err: err.join('') + e.message }
  }
}
