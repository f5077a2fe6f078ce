// JsonlSession and trackToolCalls over the PostgreSQL backend: a tracked run, a run "crashed"
// (its backend dropped without closing, the way a killed process leaves it) and resumed.
// Runs on the suite's shared throwaway server (test/helpers/pg-global-setup.ts).
import { Agent, type AgentInputItem, run, tool } from '@openai/agents'
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents-core/testing'
import { afterAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { JsonlSession, trackToolCalls } from '../src/adapters/openai-agents/index.js'
import { INTERRUPTED_TOOL_TEXT } from '../src/session/closers.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

process.env.OPENAI_AGENTS_DISABLE_TRACING = '1'
const url = pgUrl()
const schema = freshSchema('oa_adapter')
afterAll(async () => {
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('JsonlSession over PostgreSQL', () => {

  it('a tracked run comes back deep-equal; a run cut in its tool resumes with the crash text', async () => {
    const open = () => createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
    const echo = tool({ name: 'echo', description: 'echo', parameters: z.object({ s: z.string() }), execute: async ({ s }) => s })

    const first = open()
    const session = new JsonlSession({ persistence: first, sessionId: 'pg-run' })
    const added: AgentInputItem[] = []
    const addItems = session.addItems.bind(session)
    session.addItems = async (items) => {
      added.push(...structuredClone(items))
      await addItems(items)
    }
    const model = new ScriptedModel([[functionCall('echo', { s: 'one' }, { callId: 'e1' })], [assistantMessage('echoed')]])
    const agent = new Agent({ name: 'A', instructions: 'echo', model, tools: [echo] })
    const untrack = trackToolCalls(agent, session)
    expect((await run(agent, 'echo one', { session })).finalOutput).toBe('echoed')
    untrack()
    expect(await session.getItems()).toEqual(added)

    // The next run stops inside its tool: the call is durable, the run never adds its items.
    let reachedTool!: () => void
    const inTool = new Promise<void>((resolve) => (reachedTool = resolve))
    const stuck = tool({
      name: 'stuck',
      description: 'never returns',
      parameters: z.object({}),
      execute: () => {
        reachedTool()
        return new Promise<string>(() => {})
      },
    })
    const model2 = new ScriptedModel([[functionCall('stuck', {}, { callId: 's1' })]])
    const agent2 = new Agent({ name: 'A', instructions: 'stuck', model: model2, tools: [stuck] })
    trackToolCalls(agent2, session)
    void run(agent2, 'get stuck', { session })
    await inTool
    // What a killed process leaves: its connections gone, its sessions never closed.
    await first.end()

    const second = open()
    const resumed = new JsonlSession({ persistence: second, sessionId: 'pg-run' })
    const items = await resumed.getItems()
    expect(items.slice(0, added.length)).toEqual(added)
    expect(items.slice(added.length)).toEqual([
      { type: 'message', role: 'user', content: 'get stuck' },
      { type: 'function_call', name: 'stuck', callId: 's1', status: 'completed', arguments: '{}' },
      { type: 'function_call_result', name: 'stuck', callId: 's1', status: 'incomplete', output: { type: 'text', text: INTERRUPTED_TOOL_TEXT } },
    ])
    await resumed.close()
    await second.end()
  }, 120_000)
})
