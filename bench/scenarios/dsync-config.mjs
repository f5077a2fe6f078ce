// Which configuration, if any, makes this build of the package write with O_DSYNC (one write
// that is also the data sync) instead of write + fdatasync. BENCH_DSYNC_CONFIG='{"…":…}' names
// one explicitly; otherwise the known spellings are tried against the configuration schema
// (creating an instance does no I/O, and an option the build does not know is refused).
import { createJsonlPersistence } from '../../dist/index.js'

const CANDIDATES = [{ sync: 'dsync' }, { syncMethod: 'dsync' }, { dsync: true }]

/** The package's O_DSYNC configuration, or undefined when this build offers none. */
export function packageDsyncConfig() {
  if (process.env.BENCH_DSYNC_CONFIG) return JSON.parse(process.env.BENCH_DSYNC_CONFIG)
  for (const candidate of CANDIDATES) {
    try {
      createJsonlPersistence({ root: '/nonexistent-bench-root', ...candidate })
      return candidate
    } catch {
      // not this spelling
    }
  }
  return undefined
}
