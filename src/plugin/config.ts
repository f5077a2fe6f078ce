import { z } from 'zod'
import { describeZodError, JsonlConfigSchema, JsonlJsonConfigSchema } from '../core/schema.js'
import { SessionPersistenceError } from '../errors.js'
import type { SessionPersistence } from '../persistence.js'

const pluginFields = {
  flushDelayMs: z
    .number()
    .int()
    .nonnegative()
    .default(200)
    .describe('A buffered event is made durable at most this long after it arrived (turn ends drain at once).'),
  maxBufferedBytes: z
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024)
    .describe('While drains fail, buffered events are kept up to this many bytes over all sessions; past it new events are dropped and reported.'),
}

/** The JSON-representable plugin configuration: what `plugin.manifest.json` publishes as JSON Schema. */
export const PluginJsonConfigSchema = JsonlJsonConfigSchema.extend(pluginFields).strict()

const PersistenceSchema = z.custom<SessionPersistence>(
  (v) =>
    typeof v === 'object' &&
    v !== null &&
    ['create', 'append', 'load', 'inspect', 'list', 'close', 'locate'].every(
      (m) => typeof (v as Record<string, unknown>)[m] === 'function',
    ),
  'persistence must implement SessionPersistence',
)

/** `JsonlConfig` plus the plugin's fields, or another backend plus the plugin's fields (SPEC 8). */
export const PluginConfigSchema = z.union([
  JsonlConfigSchema.extend(pluginFields).strict(),
  z.object({ persistence: PersistenceSchema, ...pluginFields }).strict(),
])
export type PluginConfig = z.input<typeof PluginConfigSchema>

export function parsePluginConfig(config: PluginConfig): z.output<typeof PluginConfigSchema> {
  const result = (
    typeof config === 'object' && config !== null && 'persistence' in config
      ? PluginConfigSchema.options[1]
      : PluginConfigSchema.options[0]
  ).safeParse(config)
  if (!result.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid plugin configuration: ${describeZodError(result.error)}`, {
      cause: result.error,
    })
  }
  return result.data
}
