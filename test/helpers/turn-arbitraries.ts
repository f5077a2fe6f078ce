import fc from 'fast-check'

// The events of a turn that closers read (§6.1), in every shape a host (or a damaged log) may
// give them: ids of several types, `data` missing, null, a string or an array, message content
// that is not an array. Drawn by the property tests of verify's bounded checks (JSONL and
// PostgreSQL) against `inspect`.
const callId = fc.constantFrom('a', 'b', 'c', 7)
const data = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom(undefined, null, 'text', [1, 2]) },
  { weight: 4, arbitrary: fc.record({ turn: fc.option(fc.nat(3), { nil: undefined }), step: fc.option(fc.nat(3), { nil: undefined }), callId: fc.option(callId, { nil: undefined }) }, { requiredKeys: [] }) },
)
const block = fc.oneof(fc.record({ type: fc.constant('tool-call'), callId, name: fc.constant('sh') }), fc.record({ type: fc.constant('text'), text: fc.constant('t') }), fc.constant(null))
const message = fc.record({ turn: fc.option(fc.nat(3), { nil: undefined }), step: fc.nat(3), content: fc.oneof(fc.array(block, { maxLength: 4 }), fc.constant('not an array')) }, { requiredKeys: ['content'] })

/** One event's type and data (no seq, no time). */
export const turnStep = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constantFrom('turn/start', 'turn/end', 'step/start', 'step/end', 'tool/call', 'tool/result', 'user/message', 'other'), data }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('turn/start'), data: fc.record({ turn: fc.nat(3) }) }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('step/start'), data: fc.record({ turn: fc.nat(3), step: fc.nat(3) }) }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('assistant/message'), data: fc.oneof(message, data) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('tool/result'), data: fc.record({ callId, turn: fc.nat(3) }) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('tool/call'), data: fc.record({ callId, turn: fc.nat(3), step: fc.nat(3) }) }) },
)
