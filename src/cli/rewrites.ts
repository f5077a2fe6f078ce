import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { JsonlSessionPersistence, ListProblem, SessionStore } from '../persistence.js'
import type { Io } from './commands.js'
import type { OpenedRoot } from './open-root.js'
import { heldSessions } from './lock-verdicts.js'
import { oneLine, shown } from './render.js'

// The operator's rewrites of closed logs (docs/contract.md §16, §11): `migrate`, `redact` and
// `repair --truncate-at-damage`. They rewrite files, so they work on a JSONL root only.

// A session being written is skipped, not failed: run the command again when it is closed.
const SKIPPED = new Set(['E_LOCKED', 'E_SESSION_LIVE'])

function jsonlStore(root: OpenedRoot, command: string): JsonlSessionPersistence {
  const s = root.store as SessionStore & Partial<JsonlSessionPersistence>
  if (typeof s.migrate !== 'function' || typeof s.redact !== 'function' || typeof s.truncateAtDamage !== 'function') {
    throw new SessionPersistenceError('E_CONFIG', `${command} rewrites log files: it works on a directory root, not on ${root.name}`)
  }
  return s as JsonlSessionPersistence
}

interface Outcome {
  /** The session's id; a log that could not be listed (its header damaged) has only its `path`. */
  id?: string
  path?: string
  /** `would-do`: a dry run found something to do (what `done` would say without --dry-run). */
  status: 'done' | 'would-do' | 'unchanged' | 'skipped' | 'refused'
  code?: string
  message?: string
  [detail: string]: unknown
}

/**
 * Runs `each` over `ids`, one at a time, and reports; exit 1 when any was refused. `unlisted`
 * are logs the listing reported as problems (with --all): each is reported refused.
 */
async function forEachSession(
  io: Io,
  what: string,
  ids: readonly string[],
  json: boolean,
  dryRun: boolean,
  each: (id: string) => Promise<Outcome>,
  unlisted: readonly ListProblem[] = [],
  root?: OpenedRoot,
): Promise<number> {
  const outcomes: Outcome[] = unlisted.map((pr) => ({ path: pr.path, status: 'refused', code: pr.code, message: pr.message }))
  if (!json) for (const pr of unlisted) io.err(`refused ${shown(pr.path, true)}: ${pr.code}: ${oneLine(pr.message, 200)}\n`)
  // A dry run takes no lock: it reads the lock directory as a takeover would judge it, so that
  // it skips what the real run will skip (a session a live writer holds), as prune's does.
  const held = dryRun && root?.directory !== undefined ? await heldSessions(root.directory) : undefined
  for (const [i, id] of ids.entries()) {
    let outcome: Outcome
    try {
      const locked = held?.get(id)
      if (locked) throw locked
      outcome = await each(id)
    } catch (err) {
      if (!isSessionPersistenceError(err)) throw err
      outcome = { id, status: SKIPPED.has(err.code) ? 'skipped' : 'refused', code: err.code, message: err.message }
      if (!json) io.err(`${outcome.status} ${shown(id, true)}: ${err.code}: ${oneLine(err.message, 200)}\n`)
    }
    outcomes.push(outcome)
    io.progress?.(what, i + 1, ids.length)
  }
  const n = (s: Outcome['status']) => outcomes.filter((o) => o.status === s).length
  if (json) io.out(`${JSON.stringify({ [what]: outcomes }, null, 2)}\n`)
  else if (outcomes.length > 1) io.out(`${what}: ${dryRun ? `${n('would-do')} would be done` : `${n('done')} done`}, ${n('unchanged')} unchanged, ${n('skipped')} skipped, ${n('refused')} refused\n`)
  return n('refused') > 0 ? 1 : 0
}

export async function migrate(root: OpenedRoot, io: Io, ids: readonly string[], opts: { json: boolean; dryRun: boolean; problems?: readonly ListProblem[] }): Promise<number> {
  const store = jsonlStore(root, 'migrate')
  return forEachSession(io, 'migrate', ids, opts.json, opts.dryRun, async (id) => {
    const r = await store.migrate(id, { dryRun: opts.dryRun })
    const repaired = r.repair ? `; its tail repaired first (${r.repair.closers.length} closing event(s))` : ''
    if (r.fromVersion === 1) {
      if (!opts.json) io.out(`${shown(id, true)}: already version 1\n`)
      return { id, status: 'unchanged', events: r.events }
    }
    if (!opts.json) io.out(opts.dryRun ? `${shown(id, true)}: version 0, ${r.events} events: would be rewritten as version 1${repaired.replace('repaired', 'would be repaired')}\n` : `${shown(id, true)}: migrated to version 1 (${r.events} events)${repaired}\n`)
    return { id, status: opts.dryRun ? 'would-do' : 'done', events: r.events, fromVersion: 0 }
  }, opts.problems, root)
}

export async function redact(root: OpenedRoot, io: Io, ids: readonly string[], opts: { json: boolean; dryRun: boolean; pattern: string; replacement: string | undefined }): Promise<number> {
  const store = jsonlStore(root, 'redact')
  return forEachSession(io, 'redact', ids, opts.json, opts.dryRun, async (id) => {
    const r = await store.redact(id, { pattern: opts.pattern, dryRun: opts.dryRun, ...(opts.replacement === undefined ? {} : { replacement: opts.replacement }) })
    const where = r.seqs.length > 0 ? ` in ${r.seqs.length} event(s) (seq ${r.seqs.slice(0, 20).join(', ')}${r.seqs.length > 20 ? ', …' : ''})` : ''
    const repaired = r.repair ? `; its tail ${r.repair.persisted ? 'repaired' : 'would be repaired'} first (${r.repair.closers.length} closing event(s))` : ''
    const cut = r.cutMatches ? `; ${r.cutMatches} match(es) in the bytes its repair cuts (a torn tail) ${r.rewritten ? 'removed with them' : 'would be removed with them'}` : ''
    if (!opts.json) {
      if (r.matches === 0 && !r.cutMatches) io.out(`${shown(id, true)}: no match\n`)
      else io.out(opts.dryRun ? `${shown(id, true)}: ${r.matches} match(es)${where} would be redacted${repaired}${cut}\n` : `${shown(id, true)}: ${r.matches} match(es) redacted${where}; recorded as seq ${r.record?.seq}${repaired}${cut}\n`)
    }
    // A dry run writes nothing: what it found to redact is what a run would do.
    const found = r.matches + (r.cutMatches ?? 0) > 0
    return { id, status: r.rewritten ? 'done' : opts.dryRun && found ? 'would-do' : 'unchanged', matches: r.matches, ...(r.cutMatches ? { cutMatches: r.cutMatches } : {}), seqs: r.seqs, ...(r.repair ? { repair: r.repair } : {}) }
  }, [], root)
}

export async function truncateAtDamage(root: OpenedRoot, io: Io, id: string, opts: { json: boolean; dryRun: boolean }): Promise<number> {
  const store = jsonlStore(root, 'repair --truncate-at-damage')
  // As for migrate and redact: a dry run says E_LOCKED where the real run would.
  const locked = opts.dryRun && root.directory !== undefined ? (await heldSessions(root.directory)).get(id) : undefined
  if (locked) throw locked
  const r = await store.truncateAtDamage(id, { dryRun: opts.dryRun })
  if (opts.json) io.out(`${JSON.stringify({ ...r, dryRun: opts.dryRun }, null, 2)}\n`)
  else if (!r.cut) io.out(`${shown(id, true)}: no damage found; nothing cut\n`)
  else {
    const verb = opts.dryRun ? 'would cut' : 'cut'
    io.out(
      `${shown(id, true)}: ${verb} at line ${r.cut.line} (byte ${r.cut.byteOffset}): ${r.cut.reason}\n` +
        `  kept ${r.keptEvents} event(s), ${r.closers?.length ?? 0} closing event(s), then log/truncated (seq ${r.record?.seq})\n` +
        `  the whole log ${opts.dryRun ? 'would be' : 'is'} kept beside it as ${shown(r.keptAt, true)}\n`,
    )
  }
  return 0
}
