// LangGraph's checkpointer validation suite, unchanged, over the in-memory reference backend.
import { createMemoryPersistence } from '../src/testing/index.js'
import { validateOver } from './helpers/langgraph-validate.js'

validateOver('the in-memory backend', {
  open: async () => createMemoryPersistence(),
  dispose: async () => {},
})
