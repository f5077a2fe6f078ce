#!/usr/bin/env node
// session-jsonl: the operator's view of a session root (docs/contract.md §11).
import { realpathSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import { fork, type Io, ls, repair, resolveId, resolveIds, resolveListed, tree, verify } from './commands.js'
import { exportSession, show, type ShowPage } from './show.js'
import { tail } from './tail.js'
import { copy, parseDuration, prune, rm } from './maintenance.js'
import { isPostgresUrl, openRoot, type OpenedRoot, parsePostgresUrl } from './open-root.js'
import { terminalIo } from './terminal-io.js'
import { printable } from './render.js'
import { explained, isExplained } from './cli-errors.js'
import { migrate, redact, truncateAtDamage } from './rewrites.js'
import type { ListProblem, SessionListing } from '../persistence.js'

const USAGE = `usage: session-jsonl [--root DIR|URL] <command> [options]

commands:
  ls [--cwd PATH] [--limit <n>]        sessions, newest first (the n written last)
  show <id> [--raw]                    a session as a transcript (read-only)
  show <id> --last <n>                 its last n events
  show <id> --from <seq> [--to <seq>]  the events from seq to before --to
  tail <id> [-n <n>] [-f]              the last n events (10), then each new one with -f
  tree [<id>]                          fork and delegation lineage
  verify                               check every log (read-only); exit 1 if any is corrupt
  repair <id> [--dry-run]              cut a torn tail and close an open turn
  repair <id> --truncate-at-damage [--dry-run]
                                       cut a damaged log at its first damaged line (kept aside)
  migrate [<id>...|--all] [--dry-run]  rewrite version-0 logs as version 1 (checksummed)
  redact <id>... --pattern <regex> [--replace <text>] [--dry-run]
                                       replace matches in closed sessions' string values
  fork <id> --at <n> [--id <new>]      a new session keeping the first n events
  export <id> --format md|json [--out FILE]
  rm <id>                              delete a session (not one being written)
  prune --older-than <duration> [--dry-run]
                                       delete sessions last written before then (30d, 12h, 90m)
  copy <id>... --to <root> [--skip-existing]
  copy --all --to <root> [--skip-existing]
                                       copy sessions to another root, line for line

options:
  --root DIR|URL the session root (or SESSION_JSONL_ROOT): a directory, or a
                 postgres:// URL (schema from ?schema=NAME, default session_persistence)
  --json         machine-readable output
  --help         help for a command

An id may be any unique prefix of one.`

const HELP: Record<string, string> = {
  ls: 'usage: session-jsonl ls [--cwd PATH] [--limit <n>] [--json]\n\nLists sessions with a valid header, newest first: id, creation time, cwd, size, parent or fork point, delegation depth. Reads only each log\'s first line. --cwd PATH keeps the sessions whose stored cwd is PATH as given or PATH resolved (absolute, normalised). --limit n lists the n sessions written last, most recent first, with their last write, and reads only their headers. Files that cannot be listed are named on stderr.',
  show: 'usage: session-jsonl show <id> [--raw] [--json]\n       session-jsonl show <id> --last <n> [--json]\n       session-jsonl show <id> --from <seq> [--to <seq>] [--json]\n\nPrints the session as a transcript: turns, messages, tool calls with their results (chunks folded into their message), compactions and rewinds. Interrupted calls and the closing events a repair would write are marked. --last n prints only the last n events, --from/--to the events with from <= seq < to, read without loading the rest of the log; a header line says which seqs of how many are shown. --raw prints the log\'s lines; --json the session as inspect returns it (a page as read returns it). Never writes; memory stays bounded on a log of any size.',
  tail: 'usage: session-jsonl tail <id> [-n <n>] [-f] [--json]\n\nPrints the last n events (default 10), one line each. With -f (--follow) it then prints every new event as any process writes it, until interrupted (Ctrl-C or SIGTERM: exit 0) or the session is deleted (said on stderr, exit 0). --json prints each event as stored, one JSON object per line. Takes no lock.',
  tree: 'usage: session-jsonl tree [<id>] [--json]\n\nPrints fork and delegation lineage across sessions; with an id, the tree that contains it.',
  verify: 'usage: session-jsonl verify [--json]\n\nChecks every log under the root without writing: ok, repairable (what a load would cut and write), corrupt (where and why) or unsupported (a newer format). Lists temporary files left by interrupted writes. Exits 1 when any log is corrupt or unsupported.',
  repair: 'usage: session-jsonl repair <id> [--dry-run] [--json]\n       session-jsonl repair <id> --truncate-at-damage [--dry-run] [--json]\n\nLoads the session, which cuts a torn tail and closes an open turn durably, and prints what was cut and written. --dry-run prints the same without writing. A corrupt log is refused and left untouched.\n\n--truncate-at-damage is the way out of E_CORRUPT: it keeps the whole log beside it (a dot file, never listed nor loaded), cuts the log at its first damaged line, closes an open turn, and appends an ignorable log/truncated event saying where it cut and where the original is. It is the only command that cuts committed history. A damaged header cannot be cut.',
  migrate: 'usage: session-jsonl migrate <id>... [--dry-run] [--json]\n       session-jsonl migrate --all [--dry-run] [--json]\n\nRewrites version-0 logs as version 1 (a checksum on every line) under each session\'s lock: the tail repaired first, a temporary file written and synced, renamed over the log, the bucket synced; the events read back are the same. A session being written is skipped (E_LOCKED), a damaged one refused untouched (exit 1). --dry-run only reports. Readers older than v0.3 refuse version 1: upgrade them first.',
  redact: 'usage: session-jsonl redact <id>... --pattern <regex> [--replace <text>] [--dry-run] [--json]\n\nReplaces every match of the regular expression in the string values of each closed session\'s events (never keys or structure; default replacement [REDACTED]), by the same protocol as migrate, then appends an ignorable log/redacted event: when, how many matches and which seqs, never the matched text. A session being written is skipped. Forks hold their own copy of their seed: redact them too. --dry-run counts the matches and writes nothing.',
  fork: 'usage: session-jsonl fork <id> --at <n> [--id <new>] [--json]\n\nCreates a child session that keeps the parent\'s first n events (n at least 1, just after a turn end: an empty fork would not be stored) and prints its id (a random UUID unless --id is given).',
  export: 'usage: session-jsonl export <id> --format md|json [--out FILE]\n\nWrites the session as a Markdown transcript or as JSON to stdout or FILE. Messages a history/rewind took out of the model\'s history are marked. Never writes to the log.',
  rm: 'usage: session-jsonl rm <id> [--json]\n\nDeletes the session\'s log durably. Refused (E_LOCKED) while any process is writing the session. Forks of it keep their copied events.',
  prune: 'usage: session-jsonl prune --older-than <duration> [--dry-run] [--json]\n\nDeletes every session whose last write is older than <duration>: a positive whole number and a unit, s, m, h, d or w, e.g. 30d, 12h, 90m, units adding up (1d12h); no fractions: 90m, not 1.5h. Prints each removal. A session being written, or written since it was listed, is never deleted: it is reported and skipped. --dry-run lists what would be removed and deletes nothing. Exits 1 only when a removal failed for another reason.',
  copy: 'usage: session-jsonl copy <id>... --to <root> [--skip-existing] [--json]\n       session-jsonl copy --all --to <root> [--skip-existing] [--json]\n\nCopies sessions to another root (a directory or a postgres:// URL), line for line: the copy reads back byte-identical. An id that already exists at the target is an error, checked before anything is copied, unless --skip-existing. A log with a torn tail is copied up to its last complete line; copying never takes a lock at the source. A progress line is shown on a terminal.',
}

const HINTS: Record<string, string> = {
  E_NOT_FOUND: 'see `session-jsonl ls`',
  E_AMBIGUOUS: 'give more of the id',
  E_CORRUPT: 'the file was not modified; `session-jsonl verify` shows every damaged log',
  E_FORMAT_UNSUPPORTED: 'written by a newer version of session-persistence-jsonl; upgrade to read it',
  E_LOCKED: 'another process is writing this session; retry when it has finished',
  E_BAD_FORK_POINT: '`session-jsonl show` marks where each turn ends',
  E_EXISTS: 'choose another --id, or --skip-existing for copy',
  E_SESSION_LIVE: 'close the session in this process first',
  E_CONFIG: 'check the root: a directory, or postgres://user@host/db?schema=NAME',
}

/** What the CLI says after an error's message: its code's hint, or the one that fits its case. */
function hintFor(err: SessionPersistenceError): string | undefined {
  // One id stored in two buckets (§3.1): more of the id cannot help, and `rm` refuses it too.
  if (err.code === 'E_AMBIGUOUS' && !PREFIX_AMBIGUITY.test(err.message)) return AMBIGUOUS_BUCKETS_HINT
  // A PostgreSQL root the CLI opened without creating or migrating it (open-root.ts).
  if (err.code === 'E_NOT_FOUND' && NO_SCHEMA.test(err.message)) return 'check ?schema= in the root URL; only copy --to creates a schema'
  if (err.code === 'E_FORMAT_UNSUPPORTED' && OLDER_SCHEMA.test(err.message)) return OLDER_SCHEMA_HINT
  return HINTS[err.code]
}

/** migrate.ts's requireSchema: no such schema, or one at an older version. */
const NO_SCHEMA = /^no PostgreSQL schema "/
const OLDER_SCHEMA = /^PostgreSQL schema "[^"]*" at .* older than this release's \d+/
const OLDER_SCHEMA_HINT = 'the CLI migrates only the target of copy --to: start an application of this release on it once'

/** The prefix matched several ids (commands.ts's matchId), not one id in two buckets. */
const PREFIX_AMBIGUITY = /' is a prefix of \d+ sessions: /
const AMBIGUOUS_BUCKETS_HINT = '`session-jsonl verify` lists both copies; keep one and move the other out of the root (`rm` cannot choose between them)'

/**
 * An error's message as the CLI prints it: the library's advice to fork at 0 names what the
 * CLI refuses (`--at 0` is a usage error), so the CLI names only what it accepts.
 */
function cliMessage(err: SessionPersistenceError): string {
  if (err.code === 'E_BAD_FORK_POINT') return err.message.replace(/; fork at 0 or just after a turn\/end$/, '; give --at the number of events up to and including a turn/end')
  return err.message
}

class UsageError extends Error {}

const GLOBAL_OPTIONS = ['root', 'json', 'help']
const NO_ID = new Set(['ls', 'verify', 'prune'])
const OPTIONS: Record<string, string[]> = {
  ls: ['cwd', 'limit'],
  show: ['raw', 'last', 'from', 'to'],
  tail: ['lines', 'follow'],
  tree: [],
  verify: [],
  repair: ['dry-run', 'truncate-at-damage'],
  migrate: ['all', 'dry-run'],
  redact: ['pattern', 'replace', 'dry-run'],
  fork: ['at', 'id'],
  export: ['format', 'out'],
  rm: [],
  prune: ['older-than', 'dry-run'],
  copy: ['to', 'all', 'skip-existing'],
}

export async function main(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      tokens: true,
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
        'older-than': { type: 'string' },
        to: { type: 'string' },
        all: { type: 'boolean', default: false },
        'skip-existing': { type: 'boolean', default: false },
        limit: { type: 'string' },
        last: { type: 'string' },
        from: { type: 'string' },
        lines: { type: 'string', short: 'n' },
        follow: { type: 'boolean', short: 'f', default: false },
        'truncate-at-damage': { type: 'boolean', default: false },
        pattern: { type: 'string' },
        replace: { type: 'string' },
      },
    })
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\s*\n\s*/g, ' ')) // one line on stderr
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
  if (extra.length > 0 && command !== 'copy' && command !== 'migrate' && command !== 'redact') throw new UsageError(`unexpected argument '${extra[0]}'`)
  // Nor is an id a command does not take: `prune --older-than 30d <id>` must not prune everything.
  if (arg !== undefined && NO_ID.has(command)) throw new UsageError(`${command} takes no session id (got '${arg}')`)
  // An empty id is no id and no prefix (it would match every session: `redact "$ID"` with $ID
  // unset must not rewrite the root's only session), for every command alike.
  if (arg === '' || extra.includes('')) throw new UsageError(`${command} was given an empty session id (an id, or a unique prefix of one, is at least one character)`)
  // An option a command does not take is an error, never silently ignored: `rm x --dry-run`
  // must not delete anything.
  for (const token of parsed.tokens ?? []) {
    if (token.kind === 'option' && !GLOBAL_OPTIONS.includes(token.name) && !OPTIONS[command]!.includes(token.name)) {
      throw new UsageError(`${command} does not take --${token.name}`)
    }
  }
  const rootArg = values.root ?? env.SESSION_JSONL_ROOT
  if (!rootArg) throw new UsageError('no session root: pass --root DIR (or a postgres:// URL) or set SESSION_JSONL_ROOT')
  const olderThanMs = command === 'prune' ? checkPrune(values['older-than']) : 0
  if (command === 'copy') checkCopy(values.to, values.all, arg)
  const limit = command === 'ls' && values.limit !== undefined ? count('--limit', values.limit, 1) : undefined
  const page = command === 'show' ? checkPage(values, values.raw) : undefined
  const tailLines = command === 'tail' ? (values.lines === undefined ? DEFAULT_TAIL_LINES : count('-n', values.lines, 0)) : 0
  const forkAt = command === 'fork' ? checkForkAt(values.at) : 0
  // The JSONL backend reports unreadable files through list's onProblem; a PostgreSQL server's
  // warnings (fsync off) are worth a line on stderr.
  const loggerFor = (given: string) => ({ warn: isPostgresUrl(given) ? (message: string) => io.err(`warning: ${printable(message, true)}\n`) : () => {} })
  // Every command reads its root: a directory that does not exist is a typo, not an empty root
  // (verify and prune would report success on it). `copy --to` may still create its target.
  // A PostgreSQL schema likewise (open-root.ts): its first query finds a missing one.
  // The rewrites replace log files: refused on a PostgreSQL root before anything connects (an
  // unreachable server said E_IO, hiding that the command cannot work there at all).
  const rewrite = command === 'migrate' ? 'migrate' : command === 'redact' ? 'redact' : command === 'repair' && values['truncate-at-damage'] ? 'repair --truncate-at-damage' : undefined
  if (rewrite !== undefined && isPostgresUrl(rootArg)) {
    throw new SessionPersistenceError('E_CONFIG', `${rewrite} rewrites log files: it works on a directory root, not on ${parsePostgresUrl(rootArg).name}`)
  }
  if (!isPostgresUrl(rootArg)) await requireDirectory(rootArg)
  const root = await openRoot(rootArg, loggerFor(rootArg))
  const p = root.store
  let target: OpenedRoot | undefined
  const needId = async () => {
    if (!arg) throw new UsageError(`${command} needs a session id (or a unique prefix of one)`)
    return resolveId(p, arg)
  }
  const needListed = async () => {
    if (!arg) throw new UsageError(`${command} needs a session id (or a unique prefix of one)`)
    return resolveListed(p, arg)
  }
  try {
    switch (command) {
      case 'ls':
        return await ls(root, io, { json: values.json, cwd: values.cwd, limit })
      case 'show':
        return await show(root, io, await needListed(), { json: values.json, raw: values.raw, page })
      case 'tail': {
        const id = await needId()
        if (!values.follow) return await tail(root, io, id, { json: values.json, lines: tailLines, signal: undefined })
        const interrupt = interruptSignal()
        try {
          return await tail(root, io, id, { json: values.json, lines: tailLines, signal: interrupt.signal })
        } finally {
          interrupt.dispose()
        }
      }
      case 'tree':
        return await tree(root, io, arg === undefined ? undefined : await resolveId(p, arg), { json: values.json })
      case 'verify':
        return await verify(root, io, { json: values.json })
      case 'repair':
        if (values['truncate-at-damage']) return await truncateAtDamage(root, io, await needId(), { json: values.json, dryRun: values['dry-run'] })
        return await repair(root, io, await needId(), { json: values.json, dryRun: values['dry-run'] })
      case 'migrate': {
        if (values.all === (arg !== undefined)) throw new UsageError('migrate takes session ids or --all (not both, not neither)')
        // With --all, a log that cannot be listed (a damaged or unsupported header) is refused, not passed over.
        const problems: ListProblem[] = []
        const ids = values.all ? listedIds(await p.list({ onProblem: (pr) => problems.push(pr) })) : await resolveIds(p, [arg!, ...extra], { keepUnlisted: true })
        return await migrate(root, io, ids, { json: values.json, dryRun: values['dry-run'], problems })
      }
      case 'redact': {
        if (arg === undefined) throw new UsageError('redact needs session ids')
        if (!values.pattern) throw new UsageError('redact needs --pattern <regex>')
        const ids = await resolveIds(p, [arg, ...extra], { keepUnlisted: true })
        return await redact(root, io, ids, { json: values.json, dryRun: values['dry-run'], pattern: values.pattern, replacement: values.replace })
      }
      case 'fork':
        return await fork(root, io, await needId(), { json: values.json, at: forkAt, newId: values.id })
      case 'export': {
        // --json, which every command takes, is export's --format json (given with md: a conflict).
        const format = values.format ?? (values.json ? 'json' : undefined)
        if (values.json && format !== 'json') throw new UsageError(`export --json writes --format json, not --format ${format}`)
        if (format !== 'md' && format !== 'json') throw new UsageError('export needs --format md or --format json')
        return await exportSession(root, io, await needListed(), { format, out: values.out })
      }
      case 'rm':
        return await rm(root, io, await needId(), { json: values.json })
      case 'prune':
        return await prune(root, io, { json: values.json, dryRun: values['dry-run'], olderThan: values['older-than']!, olderThanMs, now: Date.now() })
      case 'copy': {
        let ids: string[]
        if (values.all) {
          ids = listedIds(await p.list({ onProblem: (pr) => io.err(`warning: not copied ${printable(pr.path, true)}: ${pr.code}\n`) }))
        } else ids = await resolveIds(p, [arg!, ...extra])
        target = await openRoot(values.to!, loggerFor(values.to!), { create: true })
        return await copy(root, target, io, ids, { json: values.json, skipExisting: values['skip-existing'] })
      }
    }
  } finally {
    await Promise.allSettled([root.close(), target?.close()])
  }
  return 0
}

const DEFAULT_TAIL_LINES = 10

/**
 * The ids of a listing, each once, in its order. A listing names a log, and one id stored in two
 * buckets (§3.1) is two logs: an --all command acts on the id once (the store refuses it,
 * E_AMBIGUOUS), rather than report that refusal twice and count it twice.
 */
function listedIds(listings: readonly SessionListing[]): string[] {
  return [...new Set(listings.map((l) => l.meta.id))]
}

/** Refuses a root directory that does not exist (`E_NOT_FOUND`); anything else is the backend's to report. */
async function requireDirectory(given: string): Promise<void> {
  const path = resolve(given)
  try {
    await stat(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return
    throw explained(new SessionPersistenceError('E_NOT_FOUND', `no such root directory ${path}`, { cause: err }))
  }
}

/** A count given on the command line: digits only (no sign, no exponent), at least `min`. */
function count(flag: string, text: string, min: number): number {
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag} '${text}' is not ${min === 0 ? 'a non-negative' : 'a positive'} integer`)
  return n
}

/** Which events `show` prints: all of them, the last n, or a seq range (checked before anything is read). */
function checkPage(values: { last?: string | undefined; from?: string | undefined; to?: string | undefined }, raw: boolean): ShowPage | undefined {
  const { last, from, to } = values
  if (last === undefined && from === undefined && to === undefined) return undefined
  if (raw) throw new UsageError('show --raw prints the whole log; it takes no --last, --from or --to')
  if (last !== undefined) {
    if (from !== undefined || to !== undefined) throw new UsageError('show takes either --last or --from/--to, not both')
    return { last: count('--last', last, 1) }
  }
  if (from === undefined) throw new UsageError('show --to needs --from <seq>')
  const fromSeq = count('--from', from, 0)
  if (to === undefined) return { fromSeq }
  const toSeq = count('--to', to, 0)
  if (toSeq <= fromSeq) throw new UsageError(`show --to ${toSeq} must be after --from ${fromSeq} (the range is from <= seq < to)`)
  return { fromSeq, toSeq }
}

/** An AbortSignal that SIGINT or SIGTERM aborts (once; a second signal then ends the process as usual). */
function interruptSignal(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController()
  const onSignal = () => {
    dispose()
    controller.abort()
  }
  const dispose = () => {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  return { signal: controller.signal, dispose }
}

/**
 * `fork --at`: digits only, at least 1. A fork at 0 would be an empty session, and an empty
 * session is never stored (a log is written with its first event, §4.7, §5.1): the CLI would
 * print an id that names nothing, so it refuses instead.
 */
function checkForkAt(at: string | undefined): number {
  if (at === undefined) throw new UsageError('fork needs --at <n>: the number of events the child keeps, ending just after a turn end')
  const n = count('--at', at, 0)
  if (n === 0) {
    throw new UsageError('fork --at 0 would create an empty session, which is not stored until its first event: give --at the number of events to keep (just after a turn end)')
  }
  return n
}

function checkPrune(olderThan: string | undefined): number {
  if (olderThan === undefined) throw new UsageError('prune needs --older-than <duration>, e.g. 30d, 12h or 90m')
  const ms = parseDuration(olderThan)
  if (ms === undefined) throw new UsageError(`--older-than '${olderThan}' is not a duration: a positive whole number and a unit s, m, h, d or w (e.g. 30d, 12h, 90m), units adding up (1d12h); no fractions: 90m, not 1.5h`)
  return ms
}

function checkCopy(to: string | undefined, all: boolean, firstId: string | undefined): void {
  if (!to) throw new UsageError('copy needs --to <root>, a directory or a postgres:// URL')
  if (all && firstId !== undefined) throw new UsageError('copy takes either ids or --all, not both')
  if (!all && firstId === undefined) throw new UsageError('copy needs session ids, or --all')
}

/** A message with each errno code said once: Node's `ENOSPC: no space left…` after a `ENOSPC: ` prefix read `ENOSPC: ENOSPC: …`. */
function onceEach(message: string): string {
  return message.replace(/\b([A-Z][A-Z0-9_]{2,}): (?:\1: )+/g, '$1: ')
}

/** An error that is not the package's, as one line: its code (once) and its message. */
function errnoText(e: NodeJS.ErrnoException): string {
  const message = printable(String(e?.message ?? e), true)
  return onceEach(e?.code && !message.startsWith(`${e.code}: `) ? `${e.code}: ${message}` : message)
}

// Run as the binary (not when imported by a test).
const invokedAs = process.argv[1] ? realpathSync(process.argv[1]) : ''
if (invokedAs === fileURLToPath(import.meta.url)) {
  // A reader that went away (`show … | head`, `tail -f | grep -m1 …`) is the end of the output,
  // not an error: exit quietly, as other command-line tools do.
  // Any other write error (a full disk, `> /dev/full`) is one line on stderr and exit 1.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') {
      process.stderr.write(`session-jsonl: ${errnoText(err)}\n`)
      process.exit(1)
    }
    process.exit(process.exitCode ?? 0)
  })
  const io = terminalIo(process.stdout, process.stderr, process.env)
  main(process.argv.slice(2), process.env, io).then(
    (code) => {
      process.exitCode = code
    },
    (err: unknown) => {
      if (err instanceof UsageError) {
        process.stderr.write(`session-jsonl: ${printable(err.message, true)} (see session-jsonl --help)\n`)
        process.exitCode = 2
      } else if (isSessionPersistenceError(err)) {
        const hint = isExplained(err) ? undefined : hintFor(err)
        process.stderr.write(`session-jsonl: ${err.code}: ${printable(onceEach(cliMessage(err)), true)}${hint ? ` — ${hint}` : ''}\n`)
        process.exitCode = 1
      } else {
        process.stderr.write(`session-jsonl: ${errnoText(err as NodeJS.ErrnoException)}\n`)
        process.exitCode = 1
      }
    },
  )
}
