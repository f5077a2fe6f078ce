// An empty compaction summary (§2.1 allows '') gives the AI SDK history no summary message:
// providers refuse a message, or a text part, with no content. The compaction still drops what
// it summarised; a summary with something left keeps only that.
import { generateText } from 'ai'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession, toAiSdkMessages } from '../src/adapters/ai-sdk/index.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import type { JsonValue } from '../src/session/schema.js'
import { scriptedModel } from './fixtures/ai-sdk-model.js'

const EMPTY: JsonValue[] = ['', ' \n\t', [], [{ type: 'text', text: '' }], [{ type: 'text', text: '  ' }, { type: 'reasoning', text: 'hidden' }]]

describe('toAiSdkMessages and an empty compaction summary', () => {
  it('an empty summary becomes no message: the history starts with what the compaction keeps', async () => {
    for (const summary of EMPTY) {
      const persistence = createMemoryPersistence()
      const session = await openAiSdkSession({ persistence, sessionId: 'empty' })
      await session.turn('first question').end({ kind: 'completed' })
      const second = session.turn('second question')
      await second.end({ kind: 'completed' })
      const kept = session.events.filter((e) => e.type === 'turn/start').at(-1)!.seq
      await session.compact({ summary: summary as never, firstKeptSeq: kept })
      const expected = [{ role: 'user', content: 'second question' }]
      expect(session.messages, JSON.stringify(summary)).toEqual(expected)
      const all = (await persistence.read('empty')).events
      expect(toAiSdkMessages(all), JSON.stringify(summary)).toEqual(expected)

      // Nothing kept and nothing said: the next turn's model call gets its input only.
      await session.compact({ summary: summary as never })
      expect(session.messages).toEqual([])
      const { model, prompts } = scriptedModel([{ text: 'ok' }])
      const turn = session.turn('third question')
      await generateText({ model, ...turn.settings })
      await turn.done
      expect(prompts[0]).toEqual([{ role: 'user', content: [{ type: 'text', text: 'third question' }] }])
      await session.close()
    }
  })

  it('a summary with something left keeps it, without its blank text blocks', async () => {
    const session = await openAiSdkSession({ persistence: createMemoryPersistence(), sessionId: 'some' })
    await session.compact({ summary: [{ type: 'text', text: ' ' }, { type: 'text', text: 'kept' }, { type: 'image', image: 'AAAA', mediaType: 'image/png' }] })
    expect(session.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'kept' }, { type: 'image', image: 'AAAA', mediaType: 'image/png' }] },
    ])
    await session.compact({ summary: ' summary with blanks around ' })
    expect(session.messages).toEqual([{ role: 'user', content: ' summary with blanks around ' }])
    await session.close()
  })
})
