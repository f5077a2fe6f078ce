// Small builders for the LangGraph saver's tests: checkpoints and configs as LangGraph makes them.
import type { RunnableConfig } from '@langchain/core/runnables'
import { type Checkpoint, type CheckpointMetadata, uuid6 } from '@langchain/langgraph-checkpoint'
import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

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
