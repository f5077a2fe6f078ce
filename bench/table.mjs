// Prints bench/results.json as the Markdown table of docs/benchmarks.md (`node bench/table.mjs`).
import { readFileSync } from 'node:fs'

const r = JSON.parse(readFileSync(new URL('./results.json', import.meta.url), 'utf8'))
const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(3))
const sign = (t) => t.replaceAll('<=', '≤').replaceAll('>=', '≥')
console.log(`Finished ${r.date.slice(0, 16).replace('T', ' ')} UTC, printed by \`${r.command ?? `npm run bench${r.mode === 'quick' ? ' -- --quick' : ''}`}\` (${r.mode} run), node ${r.node}, ${r.cpus} × ${r.cpu}.\n`)
console.log('| figure | median | min – max | target |')
console.log('|---|---:|---:|---|')
for (const row of r.rows) {
  const targets = []
  if (row.target) targets.push(`${sign(row.target)} ${row.met ? '✅ met' : '❌ not met'}`)
  if (row.stretchTarget) targets.push(`stretch ${sign(row.stretchTarget)} ${row.stretchMet ? '✅ met' : '✗ not met'}`)
  console.log(`| ${row.name.trim()} | ${fmt(row.median)} ${row.unit} | ${fmt(row.min)} – ${fmt(row.max)} | ${targets.join('; ')} |`)
}
