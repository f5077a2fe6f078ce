// Peak RSS of one reader in a fresh process: `node rss.mjs package|baseline|stream <root> <path>`.
import { createReadStream, readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'
import { createJsonlPersistence } from '../../dist/index.js'
import { peakRssBytes } from '../lib.mjs'

const [mode, root, path] = process.argv.slice(2)
globalThis.gc?.()
const before = process.memoryUsage().rss
const started = performance.now()
let count = 0
if (mode === 'package') {
  const p = createJsonlPersistence({ root })
  count = (await p.load('big')).events.length
  await p.closeAll()
} else if (mode === 'baseline') {
  const lines = readFileSync(path, 'utf8').split('\n')
  const out = []
  for (let i = 1; i < lines.length; i++) if (lines[i]) out.push(JSON.parse(lines[i]))
  count = out.length
} else if (mode === 'stream') {
  const out = []
  let first = true
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    if (first) first = false
    else if (line) out.push(JSON.parse(line))
  }
  count = out.length
}
const peak = peakRssBytes()
process.stdout.write(JSON.stringify({ count, ms: performance.now() - started, peakAboveBaseline: peak - before }))
