// The CLI's rendering of the saver's events: readable lines for checkpoints and writes, LangChain
// messages as `role: text`, bytes by their size, internal channels by name; any other event is
// left to the generic rendering, and a malformed one never throws.
import { describe, expect, it } from 'vitest'
import { renderLangGraphEvent } from '../src/cli/render-langgraph.js'

const human = JSON.stringify([{ lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: 'hi' } }])
const ai = JSON.stringify([
  { lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'AIMessage'], kwargs: { content: '', tool_calls: [{ name: 'deploy', args: { env: 'prod' } }] } },
])

describe('renderLangGraphEvent', () => {
  it('prints a checkpoint: id, step, source, namespace, parent, changed channels', () => {
    const r = renderLangGraphEvent({
      seq: 4,
      type: 'langgraph/checkpoint',
      time: 0,
      data: {
        ns: 'sub:1',
        id: 'c2',
        parent: 'c1',
        checkpoint: {},
        metadata: { source: 'loop', step: 3, parents: {} },
        values: [
          { channel: 'messages', version: 2, value: { type: 'json', text: human } },
          { channel: 'blob', version: 1, value: { type: 'bytes', base64: 'AAECAw==' } },
          { channel: 'gone', version: 5 },
          { channel: 'branch:to:agent', version: 2, value: { type: 'json', text: 'null' } },
        ],
      },
    })
    expect(r?.text.split('\n')).toEqual([
      '◆ checkpoint c2  step 3 (loop)  ns sub:1  after c1',
      '    messages @2 = [human: hi]',
      '    blob @1 = <bytes, 4 bytes>',
      '    gone @5 = (empty)',
      '    (also branch:to:agent)',
    ])
    expect(r?.markdown.split('\n')[0]).toBe('**◆ checkpoint c2  step 3 (loop)  ns sub:1  after c1**')
  })

  it('prints writes by node, with interrupts and resumes named', () => {
    const r = renderLangGraphEvent({
      seq: 5,
      type: 'langgraph/writes',
      time: 0,
      data: {
        ns: '',
        checkpoint: 'c2',
        task: 't-1',
        path: '~__pregel_pull, agent',
        writes: [
          { idx: 0, channel: 'messages', value: { type: 'json', text: ai } },
          { idx: -3, channel: '__interrupt__', value: { type: 'json', text: '[{"value":"ok?"}]' } },
          { idx: -4, channel: '__resume__', value: { type: 'json', text: '"yes"' } },
          { idx: 1, channel: 'branch:to:tools', value: { type: 'json', text: 'null' } },
        ],
      },
    })
    expect(r?.text.split('\n')).toEqual([
      '  ↳ agent wrote to c2',
      '    messages = [ai: → deploy({"env":"prod"})]',
      '    interrupt: [{"value":"ok?"}]',
      '    resume: "yes"',
      '    (also branch:to:tools)',
    ])
  })

  it('leaves other events alone and survives malformed ones', () => {
    expect(renderLangGraphEvent({ seq: 0, type: 'user/message', time: 0, data: { content: 'hi' } })).toBeUndefined()
    expect(renderLangGraphEvent({ seq: 0, type: 'langgraph/checkpoint', time: 0, data: 'nope' })).toBeUndefined()
    const odd = renderLangGraphEvent({ seq: 0, type: 'langgraph/writes', time: 0, data: { writes: [{ channel: 'x', value: { type: 'json', text: '{not json' } }, 7] } })
    expect(odd?.text).toContain('x = {not json')
    const long = renderLangGraphEvent({ seq: 0, type: 'langgraph/checkpoint', time: 0, data: { id: 'c', values: [{ channel: 'big', version: 1, value: { type: 'json', text: JSON.stringify('z'.repeat(500)) } }] } })
    expect(long?.text.split('\n')[1]!.length).toBeLessThan(120)
  })
})
