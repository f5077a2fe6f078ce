/**
 * The releases of writer locks this process owes: a lease whose release failed (a passing
 * `EMFILE` on the read-back, an `EACCES` on the unlink) is not released, and its record, naming
 * a live process of this host, would never be taken over: every instance, this process's own
 * included, would get `E_LOCKED` naming this process for as long as it lives. So a failed
 * release stays owed, here, by the lock's path: it is retried by the next acquire of that lock
 * in this process (whichever instance asks), by a retried `close`, and by the lease's own timer
 * (Lease), until it succeeds.
 *
 * Module-wide, not per instance: any instance of this process that wants the lock can settle
 * what another one owes. (A second copy of this module, or a worker thread, has its own list:
 * it sees a live holder and waits for the owing lease's timer, as any other process does.)
 */
export interface OwedRelease {
  /** Tries the release again: resolves once the lock is gone (or is no longer ours), rejects with the failure. */
  release(): Promise<void>
}

const owed = new Map<string, Set<OwedRelease>>()

/** Notes that the release of the lock at `path` failed and is still to be done. */
export function owe(path: string, release: OwedRelease): void {
  let set = owed.get(path)
  if (!set) owed.set(path, (set = new Set()))
  set.add(release)
}

/** Notes that an owed release is done. */
export function settled(path: string, release: OwedRelease): void {
  const set = owed.get(path)
  if (!set?.delete(release)) return
  if (set.size === 0) owed.delete(path)
}

/** Retries what is owed at `path` (no file-system call when nothing is); rejects with the first failure. */
export async function retryOwed(path: string): Promise<void> {
  const set = owed.get(path)
  if (!set) return
  const results = await Promise.allSettled([...set].map((r) => r.release()))
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) throw failed.reason
}

/** Retries what is owed at every path `where` chooses (the locks of one root); rejects with the first failure. */
export async function retryOwedWhere(where: (path: string) => boolean): Promise<void> {
  const results = await Promise.allSettled([...owed.keys()].filter(where).map((path) => retryOwed(path)))
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) throw failed.reason
}
