// A LangGraph agent whose threads are session logs: a StateGraph with a model node, a ToolNode
// and a human approval through interrupt(), compiled with SessionCheckpointSaver. Offline (the
// model is scripted), so it runs anywhere:
//
//   npm run build && node examples/langgraph-agent.mjs            # JSONL under a temp directory
//   node examples/langgraph-agent.mjs ./sessions                  # JSONL under ./sessions
//   node examples/langgraph-agent.mjs postgres://user@host/db     # PostgreSQL (schema langgraph_example)
//
// Run it twice with the same root: the second run finds the thread waiting for its approval.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BaseChatModel } from '@langchain/core/language_models/chat_models'
import { AIMessage, HumanMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { Command, END, interrupt, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph'
import { ToolNode } from '@langchain/langgraph/prebuilt'
import { z } from 'zod'
import { createJsonlPersistence } from 'session-persistence-jsonl'
import { SessionCheckpointSaver } from 'session-persistence-jsonl/langgraph'
import { createPostgresPersistence } from 'session-persistence-jsonl/postgres'

/** Stands in for a real chat model (ChatOpenAI, ChatAnthropic…): asks for `deploy`, then reports. */
class ScriptedModel extends BaseChatModel {
  _llmType() {
    return 'scripted'
  }
  async _generate(messages) {
    const last = messages.at(-1)
    const message =
      last?._getType() === 'tool'
        ? new AIMessage(`The deploy finished: ${last.content}`)
        : new AIMessage({ content: '', tool_calls: [{ id: `call_${messages.length}`, name: 'deploy', args: { env: 'production' } }] })
    return { generations: [{ message, text: String(message.content) }] }
  }
}

const deploy = tool(async ({ env }) => `deployed to ${env}`, {
  name: 'deploy',
  description: 'Deploys the service',
  schema: z.object({ env: z.string() }),
})

const target = process.argv[2] ?? mkdtempSync(join(tmpdir(), 'langgraph-example-'))
const persistence = /^postgres(ql)?:\/\//.test(target)
  ? createPostgresPersistence({ connectionString: target, schema: 'langgraph_example' })
  : createJsonlPersistence({ root: target })
const checkpointer = new SessionCheckpointSaver({ persistence })

const model = new ScriptedModel({})
const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addNode('approve', () => {
    // Stops the run here; the answer comes with the next invoke, in this process or another.
    const answer = interrupt({ question: 'Deploy to production?' })
    return new Command({ goto: answer === 'yes' ? 'tools' : END })
  }, { ends: ['tools', END] })
  .addNode('tools', new ToolNode([deploy]))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', (s) => (s.messages.at(-1)?.tool_calls?.length ? 'approve' : END), ['approve', END])
  .addEdge('tools', 'agent')
  .compile({ checkpointer })

const config = { configurable: { thread_id: 'release-42' }, durability: 'sync' }
try {
  const state = await graph.getState(config)
  if (state.next.includes('approve')) {
    console.log('The thread is waiting for an approval: resuming it with "yes".')
    const done = await graph.invoke(new Command({ resume: 'yes' }), config)
    console.log(done.messages.at(-1).content)
  } else {
    const paused = await graph.invoke({ messages: [new HumanMessage('Ship it.')] }, config)
    console.log('Interrupted:', paused.__interrupt__?.[0]?.value)
    console.log(`Run again with the same root to approve: node examples/langgraph-agent.mjs ${target}`)
  }
  const history = []
  for await (const t of checkpointer.list(config)) history.push(`${t.metadata?.source} step ${t.metadata?.step}`)
  console.log(`${history.length} checkpoints on thread release-42 (newest first): ${history.join(', ')}`)
  if (!/^postgres/.test(target)) console.log(`The log: npx session-jsonl --root ${target} show langgraph:release-42`)
} finally {
  await checkpointer.close() // releases the thread's lock now rather than after idleMs
  await (persistence.end?.() ?? persistence.closeAll())
}
