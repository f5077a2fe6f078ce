import { join } from 'node:path'
import type { StoreContext } from '../store-context.js'
import { type LockOwner, type ObservedRecord, observeRecord, observeTaken, recordKey, sameRecord } from './lock-owner.js'
import { linkRecord, writeRecordFile } from './record-file.js'

export const MARKER_PREFIX = '.takeover-'

/** A claim on replacing one stale lock: only its holder may replace it. */
export interface TakeoverClaim {
  /**
   * False when another instance has stepped over this claim's marker as stale (this instance
   * stalled for longer than `staleLockMs` since it claimed): it must not replace the lock then.
   */
  stillOurs(): Promise<boolean>
  /** Removes this claim's marker and the stale markers it stepped over. */
  release(): Promise<void>
}

/**
 * What a claim came to: the claim; `blocked`, another instance is taking over (`taker` is the
 * maker of the live marker in the way, undefined for a loop of markers planted by hand); or
 * `changed`, a marker in the way went meanwhile (its maker finished), so the lock it was about
 * has changed and the caller looks at it again.
 */
export type ClaimOutcome =
  | { readonly kind: 'claimed'; readonly claim: TakeoverClaim }
  | { readonly kind: 'blocked'; readonly taker: LockOwner | undefined }
  | { readonly kind: 'changed' }

export interface ClaimOptions {
  /** The lock directory. */
  dir: string
  /** The stale lock being replaced. */
  stale: ObservedRecord
  /** What the marker records about its maker. */
  maker: LockOwner
  /** Whether a marker found in the way is itself stale (its maker dead, or it is too old). */
  isStale: (marker: ObservedRecord) => Promise<boolean>
}

/**
 * Claims the right to replace a stale lock, race-free: the marker `.takeover-<key of the lock>`
 * is published with `link()`, which only one instance can do. A marker found in the way whose
 * maker died or that is older than its maker's `staleLockMs` is itself stale and is stepped
 * over the same way: the claim moves on to `.takeover-<key of that marker>`, which again only
 * one instance can create. A marker is removed only while its name still holds the file the
 * claim saw there.
 */
export async function claimTakeover(ctx: StoreContext, options: ClaimOptions): Promise<ClaimOutcome> {
  const { dir, maker, isStale } = options
  const file = await writeRecordFile(ctx, dir, maker)
  const steppedOver: Marker[] = []
  let key = recordKey(options.stale)
  // No bound on the chain: each crashed claim adds one stale marker, and a bound would let
  // enough crashes lock the session for good. Only a loop (markers planted by hand) stops it.
  const seen = new Set<string>()
  try {
    await file.close()
    while (!seen.has(key)) {
      seen.add(key)
      const marker = join(dir, `${MARKER_PREFIX}${key}`)
      if (await linkRecord(ctx, file, marker)) {
        const markers = [{ path: marker, record: { ino: file.ino, owner: maker } }, ...steppedOver]
        return { kind: 'claimed', claim: claim(ctx, join(dir, `${MARKER_PREFIX}${maker.token}`), markers) }
      }
      const existing = await observeTaken(ctx.fs, marker)
      // Gone meanwhile (its maker finished): the lock it was about has changed; let the caller look again.
      if (!existing) return { kind: 'changed' }
      if (!(await isStale(existing))) return { kind: 'blocked', taker: existing.owner }
      steppedOver.push({ path: marker, record: existing })
      key = recordKey(existing)
    }
    return { kind: 'blocked', taker: undefined }
  } finally {
    await file.discard()
  }
}

/** A marker as this claim saw it: removed only while its name still holds that record (inode and token). */
interface Marker {
  path: string
  record: Pick<ObservedRecord, 'ino' | 'owner'>
}

function claim(ctx: StoreContext, successor: string, markers: Marker[]): TakeoverClaim {
  return {
    async stillOurs() {
      return (await observeRecord(ctx.fs, successor)) === undefined
    },
    async release() {
      // A claim stepped over (its successor's name taken: it stalled past its staleLockMs) is no
      // longer ours, nor are its markers: they are links of the successor's chain, which that
      // claim releases. Removing them would let this instance's next try claim the first name
      // again and replace the lock the successor is about to take: two writers.
      if (!(await this.stillOurs())) return
      // Ours first: a crash between these leaves only stale markers, which the next claim steps over.
      // A name another instance has claimed again since (after this one stalled) is left alone.
      for (const marker of markers) {
        const current = await observeRecord(ctx.fs, marker.path).catch(() => undefined)
        if (sameRecord(current, marker.record)) await ctx.fs.unlink(marker.path).catch(() => {})
      }
    },
  }
}
