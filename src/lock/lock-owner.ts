import { hostname } from 'node:os'
import { z } from 'zod'
import type { FileSystem } from '../fs/file-system.js'

/** What a lock file records about its holder (SPEC 5.3). */
export const LockOwnerSchema = z.object({
  pid: z.number().int(),
  host: z.string(),
  bootId: z.string(),
  pidNs: z.string(),
  since: z.number(),
  staleLockMs: z.number().positive(),
  token: z.string().min(1),
})
export type LockOwner = z.infer<typeof LockOwnerSchema>

export interface MachineIdentity {
  host: string
  bootId: string
  pidNs: string
}

/** Host, boot and pid namespace of this process: a pid only means something within all three. */
export async function readMachineIdentity(fs: FileSystem): Promise<MachineIdentity> {
  let bootId = ''
  try {
    const h = await fs.open('/proc/sys/kernel/random/boot_id', 'r')
    try {
      const buf = Buffer.alloc(64)
      const n = await h.read(buf, 0, buf.length, 0)
      bootId = buf.toString('utf8', 0, n).trim()
    } finally {
      await h.close()
    }
  } catch {
    // Not Linux: staleness then relies on the host name and the heartbeat.
  }
  let pidNs = ''
  try {
    pidNs = await fs.readlink('/proc/self/ns/pid')
  } catch {
    // Same as above.
  }
  return { host: hostname(), bootId, pidNs }
}

/** Whether `pid` names a live process of this pid namespace (EPERM: it exists, not ours). */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export function describeOwner(owner: LockOwner): string {
  return `pid ${owner.pid} on host ${owner.host} since ${new Date(owner.since).toISOString()}`
}
