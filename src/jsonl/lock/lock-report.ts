import { join } from 'node:path'
import { decodeSessionId } from '../../session/id-encoding.js'
import { errno } from '../errno.js'
import { LOCKS_DIR, TMP_PREFIX } from '../paths.js'
import type { FileSystem } from '../fs/file-system.js'
import { createNodeFileSystem } from '../fs/node-file-system.js'
import { type LockOwner, observeRecord, writerState } from './lock-owner.js'
import { readProcessIdentity } from './process-identity.js'
import { MARKER_PREFIX } from './takeover.js'

/** One entry of a root's lock directory, as `verify` shows it. */
export interface LockEntry {
  path: string
  /** A session's lock, a takeover marker, or a temporary file an interrupted write left. */
  kind: 'lock' | 'marker' | 'temporary'
  /** The session a lock belongs to (undefined for markers and temporary files). */
  sessionId: string | undefined
  /** The holder or maker; undefined when the file cannot be read. */
  owner: LockOwner | undefined
  /** `alive`/`dead` when it can be told from this host, otherwise `unknown`. */
  writer: 'alive' | 'dead' | 'unknown'
  /** Whether another instance would take it over (a lock) or step over it (a marker) now. */
  stale: boolean
  /** Since the file was last refreshed (its mtime). */
  ageMs: number
}

/**
 * What `<root>/.locks` holds, read-only (no lock is taken or changed): every lock with its
 * holder, every takeover marker with its maker, and leftover temporary files, each judged by
 * the same rules as a takeover (docs/locking.md).
 */
export async function readLockEntries(root: string, options: { fs?: FileSystem } = {}): Promise<LockEntry[]> {
  const fs = options.fs ?? createNodeFileSystem()
  const dir = join(root, LOCKS_DIR)
  let names: string[]
  try {
    names = (await fs.readdir(dir)).filter((e) => e.isFile).map((e) => e.name)
  } catch (err) {
    if (errno(err) === 'ENOENT') return []
    throw err
  }
  const self = await readProcessIdentity(fs)
  const entries: LockEntry[] = []
  for (const name of names.sort()) {
    const path = join(dir, name)
    const record = await observeRecord(fs, path)
    if (!record) continue // gone meanwhile
    const kind = name.startsWith(MARKER_PREFIX) ? 'marker' : name.startsWith(TMP_PREFIX) ? 'temporary' : 'lock'
    const ageMs = Date.now() - record.mtimeMs
    const writer = record.owner ? await writerState(fs, record.owner, self) : 'unknown'
    const tooOld = record.owner !== undefined && ageMs > record.owner.staleLockMs
    const stale =
      kind === 'temporary' ||
      record.owner === undefined ||
      writer === 'dead' ||
      (kind === 'marker' ? tooOld : writer === 'unknown' && tooOld)
    const sessionId = kind === 'lock' && name.endsWith('.lock') ? decodeSessionId(name.slice(0, -'.lock'.length)) : undefined
    entries.push({ path, kind, sessionId, owner: record.owner, writer, stale, ageMs })
  }
  return entries
}
