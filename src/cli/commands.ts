import { randomUUID } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import PQueue from 'p-queue'
import { ERROR_CODES, type ErrorCode, isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { ListProblem, LoadedSession, RepairReport, SessionListing, SessionStore } from '../persistence.js'
import { checkLog } from '../jsonl/check-log.js'
import { LOG_SUFFIX } from '../jsonl/paths.js'
import { decodeSessionId } from '../session/id-encoding.js'
import { formatBytes, formatTime, oneLine, shown, type Style } from './render.js'
import { describeLocation } from '../session/location.js'
import type { OpenedRoot } from './open-root.js'
import { describeLockVerdict, heldBy, lockVerdicts } from './lock-verdicts.js'

export interface Io {
  out: (s: string) => void
  err: (s: string) => void
  style: Style
  /** A progress line on a terminal only (undefined otherwise): `what done/total`. */
  progress: ((what: string, done: number, total: number) => void) | undefined
  /** Resolves when stdout has taken what was written (so a streamed view never buffers the log); absent in tests. */
  drain?: () => Promise<void>
}

/** A session id from an exact id or a unique prefix of one; an ambiguous prefix lists the matches. */
export async function resolveId(p: SessionStore, given: string): Promise<string> {
  return (await resolveListed(p, given)).id
}

/** The same, with the session's listing (undefined for an id not listed, e.g. a damaged header): one listing of the root. */
export async function resolveListed(p: SessionStore, given: string): Promise<{ id: string; listing: SessionListing | undefined; problem?: ListProblem }> {
  const { listings, unlisted, problems } = await knownIds(p)
  const id = matchId(listings.map((l) => l.meta.id), unlisted, given)
  const listing = listings.find((l) => l.meta.id === id)
  const problem = listing ? undefined : problems.get(id)
  return { id, listing, ...(problem ? { problem } : {}) }
}

/**
 * Several ids (or prefixes), each resolved once against one listing. An id that matches no listed
 * session is refused before anything is done (`E_NOT_FOUND`, naming every such id), or with
 * `keepUnlisted` kept as given, for the operation to say what is wrong with it (a damaged or
 * unsupported header, no such session).
 */
export async function resolveIds(p: SessionStore, given: readonly string[], options: { keepUnlisted?: boolean } = {}): Promise<string[]> {
  const { listings, unlisted, problems } = await knownIds(p)
  const ids = listings.map((l) => l.meta.id)
  const resolved = [...new Set(given.map((g) => matchId(ids, unlisted, g)))]
  const unknown = options.keepUnlisted ? [] : resolved.filter((id) => !ids.includes(id))
  if (unknown.length > 0) {
    const named = (id: string) => `'${id}'${problems.has(id) ? ` (its log could not be listed: ${problems.get(id)!.code})` : ''}`
    throw new SessionPersistenceError('E_NOT_FOUND', `no listed session matches ${unknown.map(named).join(', ')}`)
  }
  return resolved
}

/**
 * The listed sessions, and the ids of the logs the listing reported as problems (a damaged or
 * unsupported header, a header naming another id): those are sessions too. An exact id of one
 * means that one, never a longer id it is a prefix of, and a prefix that matches one and a
 * listed session is ambiguous.
 */
export async function knownIds(p: SessionStore): Promise<{ listings: SessionListing[]; unlisted: Set<string>; problems: Map<string, ListProblem> }> {
  const reported: ListProblem[] = []
  const listings = await p.list({ onProblem: (pr) => reported.push(pr) })
  const idOf = problemIdReader(p)
  const problems = new Map<string, ListProblem>()
  for (const pr of reported) {
    const id = idOf(pr.path)
    if (id !== undefined && !problems.has(id)) problems.set(id, pr)
  }
  return { listings, unlisted: new Set(problems.keys()), problems }
}

/**
 * The session id a listing problem's path names, if it names one: on a JSONL root the log's file
 * name is the encoded id (`<encoded>.jsonl`); on a PostgreSQL root the path is the row's location,
 * `postgres:<schema>/<id>`. A directory that could not be read, or a file name that is not an
 * encoded id, names none.
 */
function problemIdReader(p: SessionStore): (path: string) => string | undefined {
  const location = p.locate({ id: 'x', createdAt: 0, delegationDepth: 0 })
  if (location.kind === 'postgres') {
    const prefix = `postgres:${location.schema}/`
    return (path) => (path.startsWith(prefix) && path.length > prefix.length ? path.slice(prefix.length) : undefined)
  }
  return (path) => {
    const name = basename(path)
    return name.startsWith('.') || !name.endsWith(LOG_SUFFIX) ? undefined : decodeSessionId(name.slice(0, -LOG_SUFFIX.length))
  }
}

function matchId(ids: readonly string[], unlisted: ReadonlySet<string>, given: string): string {
  // A prefix of every id is no prefix: refused however a caller got here (main.ts refuses it first).
  if (given === '') throw new SessionPersistenceError('E_INVALID_ID', 'an empty session id matches no session (an id, or a unique prefix of one, is at least one character)')
  if (ids.includes(given) || unlisted.has(given)) return given
  const matches = [...new Set([...ids, ...unlisted])].filter((id) => id.startsWith(given))
  if (matches.length === 1) return matches[0]!
  if (matches.length > 1) {
    throw new SessionPersistenceError('E_AMBIGUOUS', `'${given}' is a prefix of ${matches.length} sessions: ${matches.sort().join(', ')}`)
  }
  return given // no such session: let the operation say so
}

export async function ls({ store: p }: OpenedRoot, io: Io, opts: { json: boolean; cwd?: string | undefined; limit?: number | undefined }): Promise<number> {
  const problems: ListProblem[] = []
  const cwd = opts.cwd === undefined ? undefined : cwdFilter(opts.cwd)
  const listing = opts.limit === undefined ? await listAll(p, cwd, problems) : await listLastWritten(p, opts.limit, cwd, problems)
  if (opts.json) {
    io.out(`${JSON.stringify({ sessions: listing, problems }, null, 2)}\n`)
    return 0
  }
  const byLastWrite = opts.limit !== undefined
  const rows = listing.map((l) => [
    shown(l.meta.id, true),
    ...(byLastWrite ? [formatTime(l.mtimeMs)] : []),
    formatTime(l.meta.createdAt),
    l.meta.cwd === undefined ? '-' : shown(l.meta.cwd, true),
    formatBytes(l.sizeBytes),
    l.meta.parentSession ? (l.meta.seedLength !== undefined ? `fork of ${shown(l.meta.parentSession, true)}@${l.meta.seedLength}` : `sub of ${shown(l.meta.parentSession, true)}`) : '-',
    String(l.meta.delegationDepth),
  ])
  const header = ['ID', ...(byLastWrite ? ['LAST WRITE (UTC)'] : []), 'CREATED (UTC)', 'CWD', 'SIZE', 'PARENT', 'DEPTH']
  const sizeColumn = header.indexOf('SIZE')
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const fmt = (r: string[]) => r.map((c, i) => (i === sizeColumn ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd()
  io.out(`${io.style.bold(fmt(header))}\n`)
  for (const r of rows) io.out(`${fmt(r)}\n`)
  if (rows.length === 0) io.out(io.style.dim('(no sessions)\n'))
  for (const pr of problems) io.err(`warning: skipped ${shown(pr.path, true)}: ${pr.code}\n`)
  return 0
}

/**
 * Which sessions `ls --cwd PATH` keeps: those whose stored cwd is PATH exactly as given, or PATH
 * resolved (absolute and normalised, as a shell's $PWD is). A stored cwd is kept exactly as its
 * writer gave it (§3: '/proj/' and '/proj' are two buckets), so neither form alone would do:
 * typing a stored cwd selects it, however it is written, and a project's directory however it
 * is typed selects the sessions stored under its normalised path.
 */
function cwdFilter(given: string): (l: SessionListing) => boolean {
  const resolved = resolve(given)
  return (l) => l.meta.cwd !== undefined && (l.meta.cwd === given || l.meta.cwd === resolved)
}

async function listAll(p: SessionStore, cwd: ((l: SessionListing) => boolean) | undefined, problems: ListProblem[]): Promise<SessionListing[]> {
  const listing = await p.list({ onProblem: (pr) => problems.push(pr) })
  return cwd === undefined ? listing : listing.filter(cwd)
}

/**
 * The `limit` sessions written last (§15.4), newest first. With `--cwd` the backend cannot
 * filter, so it asks for twice as many each time until `limit` of that project are found or
 * the root has no more: at most about twice the headers the answer needs.
 */
async function listLastWritten(p: SessionStore, limit: number, cwd: ((l: SessionListing) => boolean) | undefined, problems: ListProblem[]): Promise<SessionListing[]> {
  for (let ask = limit; ; ask *= 2) {
    const seen: ListProblem[] = []
    const listing = await p.list({ orderBy: 'lastWrite', limit: ask, onProblem: (pr) => seen.push(pr) })
    const kept = cwd === undefined ? listing : listing.filter(cwd)
    if (kept.length >= limit || listing.length < ask) {
      problems.push(...seen)
      return kept.slice(0, limit)
    }
  }
}

export async function tree({ store: p, name }: OpenedRoot, io: Io, id: string | undefined, opts: { json: boolean }): Promise<number> {
  const { listings: listing, problems } = await knownIds(p)
  const byId = new Map(listing.map((l) => [l.meta.id, l]))
  const children = new Map<string, SessionListing[]>()
  const roots: SessionListing[] = []
  for (const l of [...listing].sort((a, b) => a.meta.createdAt - b.meta.createdAt || (a.meta.id < b.meta.id ? -1 : 1))) {
    const parent = l.meta.parentSession
    if (parent && byId.has(parent)) children.set(parent, [...(children.get(parent) ?? []), l])
    else roots.push(l)
  }
  // Sessions whose parent links form a loop (a header names itself, or two name each other) are
  // reached from no root: each loop is shown from its earliest session, so every listed one appears.
  const reached = new Set<string>()
  const reach = (l: SessionListing) => {
    if (reached.has(l.meta.id)) return
    reached.add(l.meta.id)
    for (const c of children.get(l.meta.id) ?? []) reach(c)
  }
  for (const r of roots) reach(r)
  for (const l of [...listing].sort((a, b) => a.meta.createdAt - b.meta.createdAt || (a.meta.id < b.meta.id ? -1 : 1))) {
    if (reached.has(l.meta.id)) continue
    roots.push(l)
    reach(l)
  }
  let top = roots
  if (id !== undefined) {
    let cur = byId.get(id)
    if (!cur) {
      // A log the listing could not read (a damaged or unsupported header) has no place in a tree: say why.
      const problem = problems.get(id)
      if (problem) {
        const code = (ERROR_CODES as readonly string[]).includes(problem.code) ? (problem.code as ErrorCode) : 'E_CORRUPT'
        throw new SessionPersistenceError(code, `session '${id}' is not listed: ${problem.message}`, { sessionId: id, path: problem.path })
      }
      throw new SessionPersistenceError('E_NOT_FOUND', `no session '${id}' under ${name}`, { sessionId: id })
    }
    const seen = new Set<string>()
    while (cur.meta.parentSession && byId.has(cur.meta.parentSession) && !seen.has(cur.meta.id)) {
      seen.add(cur.meta.id)
      cur = byId.get(cur.meta.parentSession)!
    }
    top = [cur]
  }
  type Node = { id: string; relation: string; createdAt: number; children: Node[] }
  const build = (l: SessionListing, seen: Set<string>): Node => ({
    id: l.meta.id,
    relation: !l.meta.parentSession ? 'root' : l.meta.seedLength !== undefined ? `fork at ${l.meta.seedLength}` : `delegated, depth ${l.meta.delegationDepth}`,
    createdAt: l.meta.createdAt,
    children: seen.has(l.meta.id) ? [] : (children.get(l.meta.id) ?? []).map((c) => build(c, new Set([...seen, l.meta.id]))),
  })
  const nodes = top.map((l) => build(l, new Set()))
  if (opts.json) {
    io.out(`${JSON.stringify(nodes, null, 2)}\n`)
    return 0
  }
  const print = (n: Node, prefix: string, last: boolean, depth: number) => {
    const branch = depth === 0 ? '' : last ? '└─ ' : '├─ '
    const rel = n.relation === 'root' ? '' : io.style.dim(` (${n.relation})`)
    io.out(`${prefix}${branch}${shown(n.id, true)}${rel}\n`)
    const next = depth === 0 ? '' : prefix + (last ? '   ' : '│  ')
    n.children.forEach((c, i) => print(c, next, i === n.children.length - 1, depth + 1))
  }
  for (const n of nodes) print(n, '', true, 0)
  if (nodes.length === 0) io.out(io.style.dim('(no sessions)\n'))
  return 0
}

type Verdict =
  | { status: 'ok'; id: string; path: string; events: number }
  | { status: 'repairable'; id: string; path: string; events: number; cutBytes: number; cutLines: number; truncateAt?: number; reason?: string; closers: number; droppedTurnEnds: number }
  | { status: 'corrupt'; id?: string; path: string; line?: number; byteOffset?: number; reason: string }
  | { status: 'unsupported'; id?: string; path: string; reason: string }

/** verify draws a progress bar for roots with more logs than this (docs/cli.md); a smaller one is checked before a bar would be read. */
const PROGRESS_AFTER_LOGS = 50

export async function verify(root: OpenedRoot, io: Io, opts: { json: boolean }): Promise<number> {
  const p = root.store
  const verdicts: Verdict[] = []
  const problems: ListProblem[] = []
  const listing = await p.list({ onProblem: (pr) => problems.push(pr) })
  for (const pr of problems) {
    verdicts.push(pr.code === 'E_FORMAT_UNSUPPORTED' ? { status: 'unsupported', path: pr.path, reason: pr.message } : { status: 'corrupt', path: pr.path, reason: pr.message })
  }
  const check = logChecker(root)
  let done = 0
  const queue = new PQueue({ concurrency: 8 })
  await queue.addAll(
    listing.map((l) => async () => {
      const { id } = l.meta
      const path = describeLocation(l.location)
      try {
        const { events, repair: r } = await check(id)
        verdicts.push(
          r
            ? {
                status: 'repairable',
                id,
                path,
                events,
                cutBytes: r.droppedBytes,
                cutLines: r.droppedLines,
                ...(r.truncatedAtByte !== undefined ? { truncateAt: r.truncatedAtByte } : {}),
                ...(r.reason !== undefined ? { reason: r.reason } : {}),
                closers: r.closers.length,
                droppedTurnEnds: r.droppedTurnEnds,
              }
            : { status: 'ok', id, path, events },
        )
      } catch (err) {
        if (isSessionPersistenceError(err, 'E_FORMAT_UNSUPPORTED')) verdicts.push({ status: 'unsupported', id, path, reason: err.message })
        else if (isSessionPersistenceError(err)) {
          const c = err as SessionPersistenceError & { line?: number; byteOffset?: number; reason?: string }
          verdicts.push({ status: 'corrupt', id, path, ...(c.line !== undefined ? { line: c.line, byteOffset: c.byteOffset! } : {}), reason: c.reason ?? `${err.code}: ${err.message}` })
        } else throw err
      }
      done++
      if (listing.length > PROGRESS_AFTER_LOGS) io.progress?.('verify', done, listing.length)
    }),
  )
  const temps = root.directory === undefined ? [] : await staleTempFiles(root.directory)
  // What a crash can leave in the lock directory (a dead writer's lock, a takeover marker, a
  // temporary lock file) delays loads for up to staleLockMs; an operator looks here for it.
  const locks = root.directory === undefined ? [] : await lockVerdicts(root.directory)
  const order = { corrupt: 0, unsupported: 1, repairable: 2, ok: 3 }
  verdicts.sort((a, b) => order[a.status] - order[b.status] || (a.path < b.path ? -1 : 1))
  const count = (s: Verdict['status']) => verdicts.filter((v) => v.status === s).length
  const summary = { logs: verdicts.length, ok: count('ok'), repairable: count('repairable'), corrupt: count('corrupt'), unsupported: count('unsupported'), tempFiles: temps.length }
  const failed = summary.corrupt + summary.unsupported > 0
  if (opts.json) {
    io.out(`${JSON.stringify({ summary, logs: verdicts, tempFiles: temps, locks }, null, 2)}\n`)
    return failed ? 1 : 0
  }
  const s = io.style
  for (const v of verdicts) {
    const name = shown(v.id ?? v.path, true)
    const path = shown(v.path, true)
    if (v.status === 'ok') io.out(`${s.green('ok')}           ${name} (${v.events} events)\n`)
    else if (v.status === 'repairable') {
      const cut = v.truncateAt !== undefined ? `would cut ${v.cutBytes} bytes in ${v.cutLines} line(s) at byte ${v.truncateAt} (${v.reason})` : 'nothing to cut'
      io.out(`${s.yellow('repairable')}   ${name}: ${cut}; would write ${v.closers} closing event(s)${v.droppedTurnEnds ? `; ${v.droppedTurnEnds} committed turn end(s) lost to zeroed blocks` : ''}\n`)
    } else if (v.status === 'corrupt') {
      // An unlisted log is named by its path already: said once, not again before and in its reason.
      const where = v.id === undefined ? '' : `: ${path}${v.line !== undefined ? ` line ${v.line}${v.byteOffset !== undefined && v.byteOffset >= 0 ? `, byte ${v.byteOffset}` : ''}` : ''}`
      const reason = v.id === undefined && v.reason.startsWith(`corrupt session log ${v.path}: `) ? v.reason.slice(`corrupt session log ${v.path}: `.length) : v.reason
      io.out(`${s.red('corrupt')}      ${name}${where}: ${oneLine(reason, 160)}\n`)
    } else io.out(`${s.red('unsupported')}  ${name}: ${oneLine(v.reason, 160)}\n`)
  }
  for (const t of temps) io.out(`${s.dim('temp file')}    ${shown(t, true)} (left by an interrupted write; safe to delete when no writer runs)\n`)
  for (const l of locks) io.out(`${describeLockVerdict(l)}\n`)
  io.out(`${summary.logs} log(s): ${summary.ok} ok, ${summary.repairable} repairable, ${summary.corrupt} corrupt, ${summary.unsupported} unsupported${temps.length ? `; ${temps.length} temporary file(s)` : ''}\n`)
  return failed ? 1 : 0
}

/**
 * How verify checks one log: on a JSONL root, one pass over the file that keeps no event
 * (src/jsonl/check-log.ts); on a PostgreSQL root, the store's bounded check (its rows checked as
 * they arrive, none kept: src/postgres/check-session.ts), found by the registered symbol that backend
 * keys it by, so that this module imports neither the backend nor `pg`. Either way memory does not
 * grow with the logs (§15.5). Any other store: `inspect`. The events counted are the log's,
 * closers excluded, and the repair is inspect's.
 */
function logChecker(root: OpenedRoot): (id: string) => Promise<{ events: number; repair: Omit<RepairReport, 'persisted'> | undefined }> {
  type Check = (id: string) => Promise<{ events: number; repair: Omit<RepairReport, 'persisted'> | undefined }>
  const { directory, store } = root
  if (directory !== undefined) return (id) => checkLog(directory, id)
  const bounded = (store as unknown as Record<symbol, Check | undefined>)[Symbol.for('session-persistence-jsonl/postgres:checkSession')]
  if (typeof bounded === 'function') return (id) => bounded.call(store, id)
  return async (id) => {
    const s = await store.inspect(id)
    return { events: s.events.length - (s.repair?.closers.length ?? 0), repair: s.repair }
  }
}

async function staleTempFiles(root: string): Promise<string[]> {
  const found: string[] = []
  let buckets: string[] = []
  try {
    buckets = (await readdir(root, { withFileTypes: true })).filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => join(root, e.name))
  } catch {
    return found
  }
  for (const bucket of buckets) {
    for (const name of await readdir(bucket).catch(() => [] as string[])) {
      if (name.startsWith('.tmp-')) found.push(join(bucket, name))
    }
  }
  return found
}

function describeRepair(session: LoadedSession, dryRun: boolean): string {
  const r = session.repair
  if (!r) return `nothing to repair: ${session.events.length} events, no torn tail, no open turn\n`
  const lines: string[] = []
  lines.push(r.truncatedAtByte !== undefined ? `${dryRun ? 'would cut' : 'cut'} ${r.droppedBytes} bytes in ${r.droppedLines} line(s) at byte ${r.truncatedAtByte}: ${r.reason}` : 'no torn tail')
  if (r.droppedTurnEnds) lines.push(`warning: ${r.droppedTurnEnds} committed turn end(s) were after zeroed (never synced) blocks and are cut too`)
  lines.push(r.closers.length ? `${dryRun ? 'would write' : 'wrote'} ${r.closers.length} closing event(s):` : 'no open turn to close')
  for (const c of r.closers) lines.push(`  seq ${c.seq} ${c.type} ${oneLine(c.data ?? null, 140)}`)
  lines.push(`${session.events.length} events ${dryRun ? 'after the repair' : 'now'}`)
  return `${lines.join('\n')}\n`
}

export async function repair(root: OpenedRoot, io: Io, id: string, opts: { json: boolean; dryRun: boolean }): Promise<number> {
  const p = root.store
  // The real run is a load, refused E_LOCKED while another process writes the session: the dry
  // run (an inspect, which takes no lock) says so too, from the locks as a takeover would judge
  // them, rather than print a plan the real run will not carry out (as the other dry runs do).
  const locked = opts.dryRun ? (await heldBy(root, [id])).get(id) : undefined
  if (locked) throw locked
  const session = opts.dryRun ? await p.inspect(id) : await p.load(id)
  await p.closeAll()
  if (opts.json) io.out(`${JSON.stringify({ id, dryRun: opts.dryRun, repair: session.repair ?? null, events: session.events.length }, null, 2)}\n`)
  else io.out(describeRepair(session, opts.dryRun))
  return 0
}

export async function fork({ store: p }: OpenedRoot, io: Io, id: string, opts: { json: boolean; at: number; newId: string | undefined }): Promise<number> {
  const meta = await p.fork(id, { id: opts.newId ?? randomUUID(), seedLength: opts.at })
  await p.closeAll()
  io.out(opts.json ? `${JSON.stringify(meta, null, 2)}\n` : `${shown(meta.id, true)}\n`)
  return 0
}
