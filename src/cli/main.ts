#!/usr/bin/env node
// session-jsonl: the operator's view of a session root (SPEC 11).
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { isSessionPersistenceError } from '../errors.js'
import { createJsonlPersistence } from '../jsonl-persistence.js'
import { exportSession, fork, type Io, ls, repair, resolveId, show, tree, verify } from './commands.js'
import { makeStyle } from './render.js'

const USAGE = `usage: session-jsonl [--root DIR] <command> [options]

commands:
  ls [--cwd PATH]                      sessions, newest first
  show <id> [--raw]                    a session as a transcript (read-only)
  tree [<id>]                          fork and delegation lineage
  verify                               check every log (read-only); exit 1 if any is corrupt
  repair <id> [--dry-run]              cut a torn tail and close an open turn
  fork <id> --at <n> [--id <new>]      a new session keeping the first n events
  export <id> --format md|json [--out FILE]

options:
  --root DIR     the session root (or SESSION_JSONL_ROOT)
  --json         machine-readable output
  --help         help for a command

An id may be any unique prefix of one.`

const HELP: Record<string, string> = {
  ls: 'usage: session-jsonl ls [--cwd PATH] [--json]\n\nLists sessions with a valid header, newest first: id, creation time, cwd, size, parent or fork point, delegation depth. Reads only each log\'s first line. Files that cannot be listed are named on stderr.',
  show: 'usage: session-jsonl show <id> [--raw] [--json]\n\nPrints the session as a transcript: turns, messages, tool calls with their results (chunks folded into their message). Interrupted calls and the closing events a repair would write are marked. --raw prints the log\'s lines; --json the session as inspect returns it. Never writes.',
  tree: 'usage: session-jsonl tree [<id>] [--json]\n\nPrints fork and delegation lineage across sessions; with an id, the tree that contains it.',
  verify: 'usage: session-jsonl verify [--json]\n\nChecks every log under the root without writing: ok, repairable (what a load would cut and write), corrupt (where and why) or unsupported (a newer format). Lists temporary files left by interrupted writes. Exits 1 when any log is corrupt or unsupported.',
  repair: 'usage: session-jsonl repair <id> [--dry-run] [--json]\n\nLoads the session, which cuts a torn tail and closes an open turn durably, and prints what was cut and written. --dry-run prints the same without writing. A corrupt log is refused and left untouched.',
  fork: 'usage: session-jsonl fork <id> --at <n> [--id <new>] [--json]\n\nCreates a child session that keeps the parent\'s first n events (n must be 0 or just after a turn end) and prints its id (a random UUID unless --id is given).',
  export: 'usage: session-jsonl export <id> --format md|json [--out FILE]\n\nWrites the session as a Markdown transcript or as JSON to stdout or FILE. Never writes to the log.',
}

const HINTS: Record<string, string> = {
  E_NOT_FOUND: 'see `session-jsonl ls`',
  E_AMBIGUOUS: 'give more of the id',
  E_CORRUPT: 'the file was not modified; `session-jsonl verify` shows every damaged log',
  E_FORMAT_UNSUPPORTED: 'written by a newer version of session-persistence-jsonl; upgrade to read it',
  E_LOCKED: 'another process is writing this session; retry when it has finished',
  E_BAD_FORK_POINT: '`session-jsonl show` marks where each turn ends',
  E_EXISTS: 'choose another --id',
}

class UsageError extends Error {}

export async function main(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        root: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        cwd: { type: 'string' },
        raw: { type: 'boolean', default: false },
        'dry-run': { type: 'boolean', default: false },
        at: { type: 'string' },
        id: { type: 'string' },
        format: { type: 'string' },
        out: { type: 'string' },
      },
    })
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
  const { values, positionals } = parsed
  const [command, arg, ...extra] = positionals
  if (!command) {
    io.out(`${USAGE}\n`)
    return values.help ? 0 : 2
  }
  if (!(command in HELP)) throw new UsageError(`unknown command '${command}' (commands: ${Object.keys(HELP).join(', ')})`)
  if (values.help) {
    io.out(`${HELP[command]}\n`)
    return 0
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`)
  const root = values.root ?? env.SESSION_JSONL_ROOT
  if (!root) throw new UsageError('no session root: pass --root DIR or set SESSION_JSONL_ROOT')
  const p = createJsonlPersistence({ root, logger: { warn: () => {} } })
  const needId = async () => {
    if (!arg) throw new UsageError(`${command} needs a session id (or a unique prefix of one)`)
    return resolveId(p, arg)
  }
  try {
    switch (command) {
      case 'ls':
        return await ls(p, io, { json: values.json, cwd: values.cwd })
      case 'show':
        return await show(p, io, await needId(), { json: values.json, raw: values.raw })
      case 'tree':
        return await tree(p, io, arg === undefined ? undefined : await resolveId(p, arg), { json: values.json })
      case 'verify':
        return await verify(p, io, { json: values.json })
      case 'repair':
        return await repair(p, io, await needId(), { json: values.json, dryRun: values['dry-run'] })
      case 'fork': {
        const at = Number(values.at)
        if (values.at === undefined || !Number.isSafeInteger(at) || at < 0) throw new UsageError('fork needs --at <n>, a non-negative integer')
        return await fork(p, io, await needId(), { json: values.json, at, newId: values.id })
      }
      case 'export': {
        if (values.format !== 'md' && values.format !== 'json') throw new UsageError('export needs --format md or --format json')
        return await exportSession(p, io, await needId(), { format: values.format, out: values.out })
      }
    }
  } finally {
    await p.closeAll()
  }
  return 0
}

// Run as the binary (not when imported by a test).
const invokedAs = process.argv[1] ? realpathSync(process.argv[1]) : ''
if (invokedAs === fileURLToPath(import.meta.url)) {
  const tty = process.stdout.isTTY === true && !('NO_COLOR' in process.env)
  const io: Io = {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
    style: makeStyle(tty),
    progress:
      process.stderr.isTTY === true
        ? (done, total) => {
            if (total < 50) return
            if (done % 25 === 0 || done === total) {
              const width = 30
              const filled = Math.round((done / total) * width)
              process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${done === total ? '\n' : ''}`)
            }
          }
        : undefined,
  }
  main(process.argv.slice(2), process.env, io).then(
    (code) => {
      process.exitCode = code
    },
    (err: unknown) => {
      if (err instanceof UsageError) {
        process.stderr.write(`session-jsonl: ${err.message} (see session-jsonl --help)\n`)
        process.exitCode = 2
      } else if (isSessionPersistenceError(err)) {
        const hint = HINTS[err.code]
        process.stderr.write(`session-jsonl: ${err.code}: ${err.message}${hint ? ` — ${hint}` : ''}\n`)
        process.exitCode = 1
      } else {
        const e = err as NodeJS.ErrnoException
        process.stderr.write(`session-jsonl: ${e.code ? `${e.code}: ` : ''}${e.message ?? String(err)}\n`)
        process.exitCode = 1
      }
    },
  )
}
