// Small builders for the LangGraph saver's tests: checkpoints and configs as LangGraph makes them.
import type { RunnableConfig } from '@langchain/core/runnables'
import { type Checkpoint, type CheckpointMetadata, uuid6 } from '@langchain/langgraph-checkpoint'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'

export function checkpoint(values: Record<string, unknown> = {}, versions?: Record<string, number>, id = uuid6(-1)): Checkpoint {
  return {
    v: 4,
    id,
    ts: new Date().toISOString(),
    channel_values: values,
    channel_versions: versions ?? Object.fromEntries(Object.keys(values).map((k) => [k, 1])),
    versions_seen: {},
  }
}

export const meta = (step: number, source: CheckpointMetadata['source'] = 'loop', extra: Record<string, unknown> = {}): CheckpointMetadata =>
  ({ source, step, parents: {}, ...extra }) as CheckpointMetadata

export const thread = (thread_id: string, checkpoint_id?: string, checkpoint_ns = ''): RunnableConfig => ({
  configurable: { thread_id, checkpoint_ns, ...(checkpoint_id === undefined ? {} : { checkpoint_id }) },
})

export async function freshRoot(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'spj-lg-'))
}

/** The event lines of a JSONL log (after the header), parsed. */
export async function logEvents(path: string): Promise<{ seq: number; type: string; data: Record<string, unknown> }[]> {
  const text = await readFile(path, 'utf8')
  return text
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l))
}

export async function codeOf(p: Promise<unknown> | (() => Promise<unknown>)): Promise<string | undefined> {
  try {
    await (typeof p === 'function' ? p() : p)
  } catch (err) {
    return (err as { code?: string }).code ?? `no code: ${String(err)}`
  }
  return undefined
}

/**
 * A function that makes a fresh root for a test, each removed after its test (registers the
 * `afterEach`; call once at a test file's top level).
 */
export function freshRoots(): () => Promise<string> {
  const roots: string[] = []
  afterEach(async () => {
    await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
  })
  return async () => {
    const r = await freshRoot()
    roots.push(r)
    return r
  }
}

/** One hand-written turn of `events` from `seq` on (turn/start, the events, turn/end). */
export const turn = (seq: number, events: { type: string; data: unknown }[]) => {
  const t = Date.now()
  return [
    { seq, type: 'turn/start', time: t, data: { turn: 1 } },
    ...events.map((e, i) => ({ seq: seq + 1 + i, time: t, ...e })),
    { seq: seq + 1 + events.length, type: 'turn/end', time: t, data: { turn: 1, reason: { kind: 'completed' } } },
  ] as never
}
