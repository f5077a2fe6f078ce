import type { AgentInputItem, FunctionCallItem } from '@openai/agents'
import { z } from 'zod'
import { type CompactionSummary, CompactionSummarySchema } from '../../session/compaction-summary.js'
import { asObject } from '../../session/as-object.js'
import type { SessionPersistence } from '../../persistence.js'

export interface JsonlSessionOptions {
  /** Any backend: the JSONL one, the in-memory reference, PostgreSQL. */
  persistence: SessionPersistence
  sessionId: string
  /** Absolute path of the project the session belongs to (used when the session is created). */
  cwd?: string
  /** Clock for event times and `createdAt` (epoch milliseconds); `Date.now` by default. */
  now?: () => number
}

// Strict, as the core config is: a misspelt key (`sessionID`, `Cwd`) would otherwise be ignored without a word.
export const OptionsSchema = z.strictObject({
  persistence: z.custom<SessionPersistence>(
    (v) => ['create', 'append', 'load', 'inspect', 'close'].every((m) => typeof asObject(v)?.[m] === 'function'),
    'must implement SessionPersistence (create, append, load, inspect, close)',
  ),
  sessionId: z.string().min(1),
  cwd: z.string().optional(),
  now: z.custom<() => number>((v) => typeof v === 'function', 'must be a function').optional(),
})

/** What `JsonlSession.compact` records (`history/compact`, docs/contract.md §2.1). */
export interface CompactOptions {
  /** What replaces the items before the kept ones: text, or content blocks (`text`, `input_*` parts). */
  summary: CompactionSummary
  /** How many of the most recent items stay after the summary (default 0). */
  keepItems?: number
}

export const CompactOptionsSchema = z.strictObject({
  summary: CompactionSummarySchema,
  keepItems: z.number().int().nonnegative().optional(),
})

/** What `trackToolCalls` calls on a session; not part of the public API. */
export interface ToolCallRecorder {
  /** `run` identifies the run (the SDK's RunContext): a new one ends a turn a failed run left open. */
  stageInput(turnInput: readonly AgentInputItem[], run?: unknown): void
  recordCall(call: FunctionCallItem, run?: unknown): Promise<void>
  recordResult(call: FunctionCallItem, output: unknown, run?: unknown): Promise<void>
  settled(): void
}
export const RECORDER = Symbol('session-persistence-jsonl/openai-agents recorder')
