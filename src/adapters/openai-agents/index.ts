/**
 * `session-persistence-jsonl/openai-agents`: crash-safe sessions for the OpenAI Agents SDK
 * (`@openai/agents`, an optional peer dependency). Only this entry point refers to it, and only
 * for types: importing the main entry never loads the SDK.
 */
export { type CompactOptions, JsonlSession, type JsonlSessionOptions } from './jsonl-session.js'
export { trackToolCalls } from './track-tool-calls.js'
export { type CompactionInForce, decodeItems, decodePlacedItems, decodeSession, type PlacedItem } from './decode-events.js'
export { FIRST_ITEM_FIELD, summaryItem } from './compaction.js'
export { POP_FIELD, POP_OF_FIELD } from './torn-pop.js'
export {
  closeTurn,
  encodeItems,
  type EncodeOptions,
  type EventDraft,
  ITEM_EVENT,
  ITEM_FIELD,
  ITEM_FROM_FIELD,
  openTurn,
  PROVISIONAL_FIELD,
  restartReplay,
  type TurnEndKind,
  type TurnState,
} from './encode-items.js'
