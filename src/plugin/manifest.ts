import { z } from 'zod'
import { PluginJsonConfigSchema } from './config.js'
import { HOST_SESSION_EVENT_NAMES } from './host.js'
import { PLUGIN_NAME } from './plugin.js'

/** The content of `plugin.manifest.json` (docs/contract.md §8), derived from the code so the two cannot drift. */
export function buildPluginManifest(version: string, description: string) {
  return {
    name: PLUGIN_NAME,
    version,
    description,
    entry: './dist/index.js',
    provides: ['sessionPersistence'],
    subscribes: [...HOST_SESSION_EVENT_NAMES],
    configSchema: z.toJSONSchema(PluginJsonConfigSchema, { io: 'input', target: 'draft-2020-12' }),
  }
}
