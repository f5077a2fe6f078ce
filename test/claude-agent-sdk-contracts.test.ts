// The SDK's 13 SessionStore contracts against the store over each backend.
import { describe, it } from 'vitest'
import { jsonlBackend, memoryBackend, postgresBackend } from './helpers/claude-agent-sdk-backends.js'
import { runStoreContracts } from './helpers/claude-agent-sdk-contracts.js'
import { pgUrl } from './helpers/pg-env.js'

runStoreContracts('the JSONL backend', jsonlBackend)
runStoreContracts('the in-memory backend', memoryBackend)

const url = pgUrl()
if (url) runStoreContracts('PostgreSQL', postgresBackend(url))
else describe.skip('SessionStore contracts over PostgreSQL (no server)', () => it('skipped', () => {}))
