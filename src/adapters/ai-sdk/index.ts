// session-persistence-jsonl/ai-sdk: the AI SDK 6 adapter (docs/adapters.md). This entry point is
// the only one that refers to `ai`, and only for types: importing the package's main entry
// never loads the framework.
export { toAiSdkMessages } from './to-messages.js'
export { type EventDraft, type MessagePlace, messagesToDrafts, messageToDrafts, TOOL_PART_EVENT } from './from-messages.js'
export { WRAPPED_PART } from './parts.js'
export {
  type AiSdkCompaction,
  type AiSdkSessionOptions,
  type AiSdkTurnInput,
  AiSdkSession,
  openAiSdkSession,
} from './session.js'
export {
  type AiSdkTurnOptions,
  type AiSdkTurnSettings,
  AiSdkTurn,
  type FinishEvent,
  type StepFinishEvent,
  type StepStartEvent,
  type ToolCallStartEvent,
  type TurnEndReason,
} from './turn.js'
