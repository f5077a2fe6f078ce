import type { RunnableConfig } from '@langchain/core/runnables'
import { SessionPersistenceError } from '../../errors.js'

/** What a `RunnableConfig` says about where a checkpoint lives. */
export interface ThreadRef {
  threadId: string
  ns: string
  checkpointId: string | undefined
}

type Configurable = Record<string, unknown>

function configurableOf(config: RunnableConfig | undefined): Configurable | undefined {
  const c = (config as { configurable?: unknown } | undefined)?.configurable
  return typeof c === 'object' && c !== null ? (c as Configurable) : undefined
}

function field(op: string, c: Configurable, name: string): string | undefined {
  const v = c[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') {
    throw new SessionPersistenceError('E_CONFIG', `${op}: config.configurable.${name} must be a string, got ${typeof v}`)
  }
  return v
}

/**
 * The thread, namespace and checkpoint a config names, or undefined when it names no thread.
 * A thread id must be a non-empty string, a namespace a string (default ''), a checkpoint id a
 * string: anything else is `E_CONFIG`.
 */
export function readRef(op: string, config: RunnableConfig | undefined): ThreadRef | undefined {
  const c = configurableOf(config)
  if (!c) return undefined
  const threadId = field(op, c, 'thread_id')
  if (threadId === undefined) return undefined
  if (threadId === '') throw new SessionPersistenceError('E_CONFIG', `${op}: config.configurable.thread_id is empty`)
  const ns = field(op, c, 'checkpoint_ns') ?? ''
  const checkpointId = field(op, c, 'checkpoint_id') || undefined
  return { threadId, ns, checkpointId }
}

/** As `readRef`, for the calls that need a thread: a config without one is `E_CONFIG`. */
export function requireRef(op: string, config: RunnableConfig | undefined): ThreadRef {
  const ref = readRef(op, config)
  if (!ref) {
    throw new SessionPersistenceError(
      'E_CONFIG',
      `${op}: config.configurable.thread_id is missing; pass { configurable: { thread_id } } so the saver knows which thread to persist`,
    )
  }
  return ref
}

/** The namespace filter of `list`: undefined lists every namespace. */
export function listNamespace(config: RunnableConfig | undefined): string | undefined {
  const c = configurableOf(config)
  return c ? field('list', c, 'checkpoint_ns') : undefined
}

/** The checkpoint id a config names, also one without a thread (`list` across threads keeps to it). */
export function checkpointIdOf(op: string, config: RunnableConfig | undefined): string | undefined {
  const c = configurableOf(config)
  return c ? field(op, c, 'checkpoint_id') || undefined : undefined
}

/** The `before` of `list`: the checkpoint id that listed ids must sort below. */
export function beforeId(before: RunnableConfig | undefined): string | undefined {
  return checkpointIdOf('list', before)
}
