import { z } from 'zod'
import { describeZodError, JsonlConfigSchema, JsonlJsonConfigSchema } from '../session/schema.js'
import { SessionPersistenceError } from '../errors.js'
import { safeParseConfig } from '../session/read-config.js'
import { printable } from '../session/value-name.js'
import type { SessionPersistence } from '../persistence.js'

const pluginFields = {
  flushDelayMs: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 31 - 1) // a longer timer fires after 1 ms (Node), and the stall watchdog with it
    .default(200)
    .describe('A buffered event is made durable at most this long after it arrived (turn ends drain at once).'),
  maxBufferedBytes: z
    .number()
    .int()
    .positive()
    .default(256 * 1024 * 1024)
    .describe('While drains fail or hang, buffered events are kept up to this many bytes over all sessions; past it new events are dropped and reported.'),
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

/** The plugin over the JSONL backend it creates (and owns): `JsonlConfig` plus the plugin's fields. */
export const JsonlPluginConfigSchema = JsonlConfigSchema.extend(pluginFields).strict()

/** The plugin over a backend the caller owns, with the logger for what nobody listens to. */
export const BackendPluginConfigSchema = z
  .object({ persistence: PersistenceSchema, logger: JsonlConfigSchema.shape.logger, ...pluginFields })
  .strict()

/** Either shape of the plugin's configuration (docs/contract.md §8). */
export const PluginConfigSchema = z.union([JsonlPluginConfigSchema, BackendPluginConfigSchema])

export type JsonlPluginConfig = z.input<typeof JsonlPluginConfigSchema>
/** `P` is kept, so `plugin.persistence` has the backend's own type (fork, closeAll, delete…). */
export type BackendPluginConfig<P extends SessionPersistence = SessionPersistence> = Omit<
  z.input<typeof BackendPluginConfigSchema>,
  'persistence'
> & { persistence: P }
export type PluginConfig = JsonlPluginConfig | BackendPluginConfig

export type ParsedPluginConfig =
  | ({ kind: 'jsonl' } & z.output<typeof JsonlPluginConfigSchema>)
  | ({ kind: 'backend' } & z.output<typeof BackendPluginConfigSchema>)

/** Validates once at the edge; `E_CONFIG` names the first bad field. */
export function parsePluginConfig(config: PluginConfig): ParsedPluginConfig {
  if (typeof config === 'object' && config !== null && hasPersistence(config)) {
    const result = safeParseConfig(BackendPluginConfigSchema, config, 'the plugin configuration')
    if (!result.success) throw configError(result.error)
    return { kind: 'backend', ...result.data }
  }
  const result = safeParseConfig(JsonlPluginConfigSchema, config, 'the plugin configuration')
  if (!result.success) throw configError(result.error)
  return { kind: 'jsonl', ...result.data }
}

/** Whether `config` names a backend; `E_CONFIG` when it cannot be asked (a revoked Proxy). */
function hasPersistence(config: object): boolean {
  try {
    return 'persistence' in config
  } catch (err) {
    throw new SessionPersistenceError('E_CONFIG', `the plugin configuration cannot be read (${printable(err)})`, { cause: err })
  }
}

function configError(error: z.ZodError): SessionPersistenceError {
  return new SessionPersistenceError('E_CONFIG', `invalid plugin configuration: ${describeZodError(error)}`, { cause: error })
}
