// Regenerates plugin.manifest.json from the zod schema (run after `npm run build`).
import { readFileSync, writeFileSync } from 'node:fs'
import { buildPluginManifest } from '../dist/plugin/manifest.js'

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const manifest = buildPluginManifest(pkg.version, pkg.description)
writeFileSync(new URL('../plugin.manifest.json', import.meta.url), `${JSON.stringify(manifest, null, 2)}\n`)
console.log('wrote plugin.manifest.json')
