import { describeLocation } from '../session/location.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../errors.js'
import type { ListProblem, SessionListing } from '../persistence.js'
import { type Io, knownIds } from './commands.js'
import type { OpenedRoot } from './open-root.js'
import { heldBy } from './lock-verdicts.js'
import { transferRaw } from './raw-stream.js'
import { formatBytes, formatTime, oneLine, shown } from './render.js'

// The commands that remove or copy whole sessions: `rm`, `prune` and `copy` (docs/contract.md §11).

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }

/** Milliseconds of a duration such as `30d`, `12h`, `90m`, `45s`, `2w` or `1d12h`; undefined if malformed or zero. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+[smhdw])+$/.test(text)) return undefined
  let ms = 0
  for (const [, n, unit] of text.matchAll(/(\d+)([smhdw])/g)) ms += Number(n) * UNITS[unit!]!
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined
}

export async function rm(root: OpenedRoot, io: Io, id: string, opts: { json: boolean }): Promise<number> {
  const { listings, problems } = await knownIds(root.store)
  const listed = listings.find((l) => l.meta.id === id)
  await root.store.delete(id)
  // A log that could not be listed (damaged, say) is named by the path its listing problem gave.
  const where = listed ? describeLocation(listed.location) : (problems.get(id)?.path ?? root.name)
  io.out(opts.json ? `${JSON.stringify({ removed: id, location: listed?.location ?? null }, null, 2)}\n` : `removed ${shown(id, true)} (${shown(where, true)})\n`)
  return 0
}

interface Skipped {
  id: string
  code: string
  message: string
}

// Refusals that leave the session as it was and that prune expects: a writer holds it, someone
// wrote it (E_SESSION_LIVE) or removed it between the listing and its turn.
const EXPECTED_SKIPS = new Set(['E_LOCKED', 'E_SESSION_LIVE', 'E_NOT_FOUND'])

// What prune says of a session written after it was listed: prune's own store never has a
// session open, so from it E_SESSION_LIVE can only mean the last-write condition failed.
const WRITTEN_SINCE_LISTED = 'written since it was listed'

export async function prune(
  root: OpenedRoot,
  io: Io,
  opts: { json: boolean; dryRun: boolean; olderThan: string; olderThanMs: number; now: number },
): Promise<number> {
  const problems: ListProblem[] = []
  const cutoff = opts.now - opts.olderThanMs
  const listing = await root.store.list({ onProblem: (p) => problems.push(p) })
  // One id stored in two buckets (§3.1) is listed once per log; the store refuses to delete it
  // (E_AMBIGUOUS: which copy is the operator's to choose). Each id is considered once, and a dry
  // run says what the real run will meet.
  const locations = new Map<string, string[]>()
  for (const l of listing) locations.set(l.meta.id, [...(locations.get(l.meta.id) ?? []), describeLocation(l.location)])
  const stale: SessionListing[] = []
  const considered = new Set<string>()
  for (const l of listing) {
    if (l.mtimeMs >= cutoff || considered.has(l.meta.id)) continue
    considered.add(l.meta.id)
    stale.push(l)
  }
  stale.sort((a, b) => a.mtimeMs - b.mtimeMs || (a.meta.id < b.meta.id ? -1 : 1))
  const removed: SessionListing[] = []
  const skipped: Skipped[] = []
  const describe = (l: SessionListing) => `${shown(l.meta.id, true)} (last write ${formatTime(l.mtimeMs)} UTC, ${formatBytes(l.sizeBytes)})`
  const skip = (id: string, code: string, message: string) => {
    skipped.push({ id, code, message })
    if (!opts.json) io.err(`skipped ${shown(id, true)}: ${code}: ${oneLine(message, 200)}\n`)
  }
  // A dry run takes no lock: it reads the lock directory as a takeover would judge it (on a
  // PostgreSQL root, the server's advisory locks: pg_locks), so that a session a live writer
  // holds is reported as the real run will skip it (E_LOCKED), not as one it would remove.
  const held = opts.dryRun ? await heldBy(root, stale.map((l) => l.meta.id)) : new Map<string, SessionPersistenceError>()
  for (const [i, l] of stale.entries()) {
    if (opts.dryRun) {
      const locked = held.get(l.meta.id)
      const copies = locations.get(l.meta.id)!
      if (copies.length > 1) skip(l.meta.id, 'E_AMBIGUOUS', `session '${l.meta.id}' exists in ${copies.length} buckets: ${copies.join(', ')}`)
      else if (locked) skip(l.meta.id, locked.code, locked.message)
      else {
        removed.push(l)
        if (!opts.json) io.out(`would remove ${describe(l)}\n`)
      }
      continue
    }
    try {
      // Decided on the last write that was listed, and checked again under the session's lock:
      // one resumed, written and closed since the listing is not old any more and is kept.
      await root.store.delete(l.meta.id, { ifLastWriteAtOrBefore: l.mtimeMs })
      removed.push(l)
      if (!opts.json) io.out(`removed ${describe(l)}\n`)
    } catch (err) {
      if (!isSessionPersistenceError(err)) throw err
      skip(l.meta.id, err.code, err.code === 'E_SESSION_LIVE' ? WRITTEN_SINCE_LISTED : err.message)
    }
    io.progress?.('prune', i + 1, stale.length)
  }
  for (const p of problems) io.err(`warning: not considered ${shown(p.path, true)}: ${p.code}\n`)
  const failed = skipped.some((s) => !EXPECTED_SKIPS.has(s.code))
  if (opts.json) {
    const entry = (l: SessionListing) => ({ id: l.meta.id, location: l.location, mtimeMs: l.mtimeMs, sizeBytes: l.sizeBytes })
    io.out(`${JSON.stringify({ olderThan: opts.olderThan, cutoffMs: cutoff, dryRun: opts.dryRun, [opts.dryRun ? 'wouldRemove' : 'removed']: removed.map(entry), skipped, problems }, null, 2)}\n`)
  } else {
    const verb = opts.dryRun ? 'would remove' : 'removed'
    const bytes = removed.reduce((n, l) => n + l.sizeBytes, 0)
    io.out(`${verb} ${removed.length} session(s), ${formatBytes(bytes)}, last written before ${formatTime(cutoff)} UTC${skipped.length ? `; ${skipped.length} skipped` : ''}\n`)
  }
  return failed ? 1 : 0
}

export async function copy(
  from: OpenedRoot,
  to: OpenedRoot,
  io: Io,
  ids: readonly string[],
  opts: { json: boolean; skipExisting: boolean },
): Promise<number> {
  // The target's sessions as the source's ids are resolved (knownIds): the listed ones and the
  // logs the listing could only report (a damaged header). Those are there too, and a copy onto
  // one fails E_EXISTS: counted here, so that the refusal still comes before anything is copied.
  const known = await knownIds(to.store)
  const existing = new Set([...known.listings.map((l) => l.meta.id), ...known.unlisted])
  const present = ids.filter((id) => existing.has(id))
  if (present.length > 0 && !opts.skipExisting) {
    // Checked before copying anything, so a refused copy leaves the target as it was.
    throw new SessionPersistenceError(
      'E_EXISTS',
      `${present.length} session(s) already exist at ${to.name}: ${present.slice(0, 10).join(', ')}${present.length > 10 ? ', …' : ''}; pass --skip-existing to copy the others`,
    )
  }
  const copied: { id: string; events: number }[] = []
  const skipped: Skipped[] = []
  const failed: Skipped[] = []
  for (const [i, id] of ids.entries()) {
    if (present.includes(id)) {
      skipped.push({ id, code: 'E_EXISTS', message: `already at ${to.name}` })
      if (!opts.json) io.out(`skipped ${shown(id, true)} (already at the target)\n`)
    } else {
      try {
        const events = await transferRaw(from.store, to.store, id)
        copied.push({ id, events })
        if (!opts.json) io.out(`copied ${shown(id, true)} (${events} events)\n`)
      } catch (err) {
        if (!isSessionPersistenceError(err)) throw err
        const entry = { id, code: err.code, message: err.message }
        if (opts.skipExisting && err.code === 'E_EXISTS') skipped.push(entry)
        else failed.push(entry)
        if (!opts.json) io.err(`${opts.skipExisting && err.code === 'E_EXISTS' ? 'skipped' : 'not copied'} ${shown(id, true)}: ${err.code}: ${oneLine(err.message, 200)}\n`)
      }
    }
    io.progress?.('copy', i + 1, ids.length)
  }
  if (opts.json) io.out(`${JSON.stringify({ from: from.name, to: to.name, copied, skipped, failed }, null, 2)}\n`)
  else io.out(`copied ${copied.length} of ${ids.length} session(s) to ${shown(to.name, true)}${skipped.length ? `; ${skipped.length} skipped` : ''}${failed.length ? `; ${failed.length} failed` : ''}\n`)
  return failed.length > 0 ? 1 : 0
}
