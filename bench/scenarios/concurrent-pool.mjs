// `node concurrent-pool.mjs <runs> <count> <modes JSON>`: the sixteen-session run in a
// process of its own, so that the caller can choose libuv's thread-pool size (UV_THREADPOOL_SIZE
// is read once, when the pool first starts). Prints one JSON array of run results.
import { concurrentRun } from './concurrent.mjs'

const [runs, count] = process.argv.slice(2, 4).map(Number)
const modes = JSON.parse(process.argv[4])
const out = []
for (let i = 0; i < runs; i++) out.push(await concurrentRun(16, count, modes))
process.stdout.write(`${JSON.stringify(out)}\n`)
