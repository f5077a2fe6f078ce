// Runs LangGraph's own checkpointer validation suite (`@langchain/langgraph-checkpoint-validation`)
// against SessionCheckpointSaver over one backend: `validate()` unchanged, plus its opt-in
// getDeltaChannelHistory conformance tests, which LangGraph runs for each of its own savers. The suite registers its tests with vitest's
// globals (the `langgraph` project sets `globals: true`); its CLI is broken in 1.1.1.
import { deltaChannelHistoryTests, validate } from '@langchain/langgraph-checkpoint-validation'
import { SessionCheckpointSaver } from '../../src/adapters/langgraph/index.js'
import type { SessionPersistence } from '../../src/persistence.js'

export interface ValidatedBackend {
  /** A fresh, empty backend for each checkpointer the suite asks for (it reuses thread ids such as "1"). */
  open(): Promise<SessionPersistence>
  /** Releases what `open` made (after the saver closed its threads). */
  dispose(persistence: SessionPersistence): Promise<void>
}

export function validateOver(name: string, backend: ValidatedBackend): void {
  const opened = new Map<SessionCheckpointSaver, SessionPersistence>()
  const initializer = {
    // Never one of the names the suite skips tests for (MemorySaver, the SQLite and MongoDB savers).
    checkpointerName: `SessionCheckpointSaver over ${name}`,
    async createCheckpointer() {
      const persistence = await backend.open()
      const saver = new SessionCheckpointSaver({ persistence })
      opened.set(saver, persistence)
      return saver
    },
    async destroyCheckpointer(saver: SessionCheckpointSaver) {
      await saver.close()
      const persistence = opened.get(saver)
      opened.delete(saver)
      if (persistence) await backend.dispose(persistence)
    },
  }
  validate(initializer)
  deltaChannelHistoryTests(initializer)
}
