// The fresh-process resume of bench/scenarios/any-length.mjs, many times over, for one or more
// builds side by side: each pair is a fresh process loading the 1 GiB log from its last
// compaction and one loading the 1 MiB log of the same tail (the order alternating), `gc()`
// before each load as the bench's children do. Run any-length.mjs with --keep first. Not part
// of any run; after `npm run build`:
//
//   node bench/probes/fresh-resume.mjs [--pairs N] [<build dir> ...]     (default: dist/)
//
// Prints, per build, the median tail and small load times and the median of the pairs' ratios.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { median } from '../lib.mjs'

const SELF = fileURLToPath(import.meta.url)
const MANIFEST = fileURLToPath(new URL('../.work/any-length/resume/manifest.json', import.meta.url))

if (process.argv[2] === '--child') {
  const [, , , dist, mode] = process.argv
  const { createJsonlPersistence } = await import(`${pathToFileURL(resolve(dist)).href}/index.js`)
  const m = JSON.parse(readFileSync(MANIFEST, 'utf8'))
  const fx = mode === 'tail' ? m.big : m.small
  const p = createJsonlPersistence({ root: fx.root })
  globalThis.gc()
  globalThis.gc()
  const t = performance.now()
  const loaded = await p.load(fx.id, mode === 'tail' ? { from: 'last-compaction' } : {})
  const ms = performance.now() - t
  if (loaded.events.length !== m.small.length) throw new Error(`${mode}: ${loaded.events.length} events`)
  await p.closeAll()
  process.stdout.write(String(ms))
  process.exit(0)
}

const args = process.argv.slice(2)
const at = args.indexOf('--pairs')
const PAIRS = at === -1 ? 30 : Number(args.splice(at, 2)[1])
const builds = args.length > 0 ? args : [fileURLToPath(new URL('../../dist', import.meta.url))]
const run = (dist, mode) => Number(execFileSync(process.execPath, ['--expose-gc', '--max-old-space-size=8192', SELF, '--child', dist, mode], { encoding: 'utf8' }))
const res = builds.map(() => ({ tail: [], small: [], ratio: [] }))
for (let i = 0; i < PAIRS; i++) {
  for (const [k, dist] of builds.entries()) {
    const [first, second] = i % 2 ? ['tail', 'small'] : ['small', 'tail']
    const r = { [first]: run(dist, first), [second]: run(dist, second) }
    res[k].tail.push(r.tail)
    res[k].small.push(r.small)
    res[k].ratio.push(r.tail / r.small)
  }
}
for (const [k, dist] of builds.entries()) {
  const { tail, small, ratio } = res[k]
  console.log(`${dist}: tail load ${median(tail).toFixed(2)} ms, 1 MiB load ${median(small).toFixed(2)} ms, tail / 1 MiB median ${median(ratio).toFixed(3)}× (${Math.min(...ratio).toFixed(2)}–${Math.max(...ratio).toFixed(2)}, ${PAIRS} pairs)`)
}
