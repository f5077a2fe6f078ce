/**
 * `session-persistence-jsonl/langgraph`: a LangGraph checkpointer over any `SessionPersistence`
 * (`@langchain/langgraph-checkpoint`, an optional peer dependency). Only this entry point
 * loads it: importing the main entry never does.
 */
export { SessionCheckpointSaver, type SessionCheckpointSaverOptions } from './saver.js'
export { DEFAULT_IDLE_MS } from './options.js'
export { HASHED_ID_PREFIX, THREAD_ID_PREFIX, THREAD_META_FIELD, threadSessionId } from './thread-id.js'
export { CHECKPOINT_EVENT, WRITES_EVENT } from './events.js'
