// LangGraph's checkpointer validation suite, unchanged, over the JSONL backend (default sync:
// every put and putWrites is fdatasync'ed), a fresh root for each checkpointer.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence, type JsonlSessionPersistence } from '../src/index.js'
import { validateOver } from './helpers/langgraph-validate.js'

validateOver('the JSONL backend', {
  open: async () => createJsonlPersistence({ root: await mkdtemp(join(tmpdir(), 'spj-langgraph-')) }),
  dispose: async (persistence) => {
    const jsonl = persistence as JsonlSessionPersistence
    await jsonl.closeAll()
    await rm(jsonl.root, { recursive: true, force: true })
  },
})
