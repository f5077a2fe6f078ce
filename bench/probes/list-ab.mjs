// `list()` of the any-length bench's 100,000-log fixture by two builds, alternating: the median
// time of each and their ratio. Run `node bench/scenarios/any-length.mjs --only list --keep`
// first (it writes the fixture), then, after building each side (e.g. `tsc --outDir`):
//
//   node --expose-gc bench/probes/list-ab.mjs <build A dir> <build B dir> [--rounds N]
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { median } from '../lib.mjs'

const args = process.argv.slice(2)
const at = args.indexOf('--rounds')
const ROUNDS = at === -1 ? 8 : Math.max(5, Number(args.splice(at, 2)[1]))
const [a, b] = args
if (!a || !b) throw new Error('usage: list-ab.mjs <build A dir> <build B dir> [--rounds N]')
const root = fileURLToPath(new URL('../.work/any-length/list', import.meta.url))
const builds = { a: await import(`${pathToFileURL(resolve(a)).href}/index.js`), b: await import(`${pathToFileURL(resolve(b)).href}/index.js`) }
const times = { a: [], b: [] }
let count
for (let i = 0; i < ROUNDS; i++) {
  for (const k of i % 2 ? ['a', 'b'] : ['b', 'a']) {
    globalThis.gc?.()
    const s = performance.now()
    const n = (await builds[k].createJsonlPersistence({ root }).list()).length
    times[k].push(performance.now() - s)
    if (count !== undefined && n !== count) throw new Error(`build ${k} listed ${n}, the other ${count}`)
    count = n
  }
}
if (!count) throw new Error(`no sessions under ${root}: run any-length.mjs --only list --keep first`)
console.log(`list() of ${count} logs, median of ${ROUNDS}: A ${median(times.a).toFixed(0)} ms, B ${median(times.b).toFixed(0)} ms, B / A ${(median(times.b) / median(times.a)).toFixed(3)}×`)
