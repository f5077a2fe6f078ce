import { z } from 'zod'

/**
 * What a `history/compact` puts in place of the history before its `firstKeptSeq` (§2.1, §7): a
 * text, or content blocks (each with a `type`: text, image, file…), as the adapters take it.
 */
export type CompactionSummary = string | readonly { type: string; [key: string]: unknown }[]

export const CompactionSummarySchema = z.union([z.string(), z.array(z.looseObject({ type: z.string() }))])
