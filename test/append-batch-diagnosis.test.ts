import { createHash } from 'node:crypto'
import { describe, expect, test } from 'vitest'
import { sameLines } from '../src/postgres/append-batch.js'

// The PostgreSQL backend's check of a batch whose COMMIT went unanswered compares what is stored
// with the batch without fetching a huge line: a short line as `l<text>`, a huge one as
// `d<SHA-256>`. A batch counts as stored only when every line is the batch's own.
const sha = (s: string) => createHash('sha256').update(Buffer.from(s)).digest('hex')

describe('sameLines', () => {
  const small = '{"seq":4,"type":"note","time":1}'
  const huge = `{"seq":5,"type":"tool/result","time":1,"data":"${'é'.repeat(1000)}"}`
  const text = `${small}\n${huge}`

  test('the same lines, short and digested, are the batch', () => {
    expect(sameLines([`l${small}`, `d${sha(huge)}`], text)).toBe(true)
    expect(sameLines([`l${small}`, `d${sha(huge)}`], Buffer.from(text))).toBe(true)
  })

  test('another writer\'s huge line at those seqs (its digest differs), or a short one that differs, is not the batch', () => {
    const theirs = huge.replace('é', 'e')
    expect(sameLines([`l${small}`, `d${sha(theirs)}`], text)).toBe(false)
    expect(sameLines([`l${small.replace('note', 'other')}`, `d${sha(huge)}`], text)).toBe(false)
  })

  test('fewer or more lines stored than the batch holds is not the batch', () => {
    expect(sameLines([`l${small}`], text)).toBe(false)
    expect(sameLines([`l${small}`, `d${sha(huge)}`, `l${small}`], text)).toBe(false)
  })
})
