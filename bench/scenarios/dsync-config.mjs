// How this build of the package writes an append: write + fdatasync, or one write on a
// descriptor opened with O_DSYNC (which is the write and its data sync in one call), and which
// configuration picks each. Read from the configuration schema itself, so the bench follows the
// build it measures: `dsyncWrites` (boolean, with a default) where the build has it.
import { JsonlConfigSchema } from '../../dist/index.js'

/**
 * `{ pair, dsync, defaultMode }`: the configuration of each write mode (`dsync` undefined when
 * the build cannot write with O_DSYNC) and the mode a default configuration gets.
 */
export function packageWriteModes() {
  const resolved = JsonlConfigSchema.safeParse({ root: '/nonexistent-bench-root' })
  const known = resolved.success && typeof resolved.data.dsyncWrites === 'boolean'
  if (!known || process.platform !== 'linux') return { pair: {}, dsync: undefined, defaultMode: 'pair' }
  return {
    pair: { dsyncWrites: false },
    dsync: { dsyncWrites: true },
    defaultMode: resolved.data.dsyncWrites ? 'dsync' : 'pair',
  }
}
