import { z } from 'zod';
import { EXAMPLE_IDS } from '../../domain/ids.ts';
import { isLongerThan, isUnstorableText, REASON_MAX_LENGTH, UNSTORABLE_TEXT_RULE } from '../../domain/problems.ts';

/**
 * The shapes of what missions take and give (contract §5, §6), each defined once: the service's
 * types are inferred from them, and the API channel documents them as they are.
 */

export const DECISIONS = ['approve', 'approve_same_type', 'reject'] as const;
export type Decision = (typeof DECISIONS)[number];

/**
 * One entry of a bulk decision, checked entry by entry so that a bad one fails alone. Unstorable
 * text (see isUnstorableText) is judged here too, for the same reason.
 */
export const DecisionEntrySchema = z.object({
  operation_id: z.string().refine((id) => !isUnstorableText(id), UNSTORABLE_TEXT_RULE)
    .meta({ description: 'The action to settle (from GET /actions).', example: EXAMPLE_IDS.action }),
  decision: z.enum(DECISIONS).meta({
    description: '`approve`; `approve_same_type` (also every other pending action of the same kind for the same agent that you own); or `reject`.',
  }),
  reason: z.string()
    .refine((reason) => !isUnstorableText(reason), UNSTORABLE_TEXT_RULE)
    // Counted in code points, which a JSON Schema maxLength does not say: the bound is documented, the check is ours.
    .refine((reason) => !isLongerThan(reason, REASON_MAX_LENGTH), `must be at most ${REASON_MAX_LENGTH} characters`)
    .meta({ maxLength: REASON_MAX_LENGTH })
    .nullable().optional().meta({
      description: 'With `reject`: the agent re-plans around it. Without one (omitted, null or blank), a rejection stops the mission. '
        + 'Ignored (and not stored) with `approve` and `approve_same_type`. At most 2000 characters (Unicode code points).',
      example: 'Not to the whole list, only to the team.',
    }),
});

/**
 * One entry of a bulk answer. The answering judges it field by field instead (a missing id, a
 * missing text and an unfitting one each get their own result), so this shape documents it.
 */
export const AnswerEntrySchema = z.object({
  request_id: z.string().meta({ description: 'The question to answer (from GET /questions).', example: EXAMPLE_IDS.question }),
  text: z.string().meta({ description: 'Your answer. The agent judges whether it fits the question.', example: '12' }),
});

const entryErrorSchema = <const C extends readonly [string, ...string[]]>(codes: C) => z.object({
  code: z.enum(codes).meta({ description: 'Stable machine-readable code.' }),
  message: z.string(),
});

export const DecisionResultSchema = z.union([
  z.object({
    operation_id: z.string(),
    ok: z.literal(true),
    outcome: z.enum(['approved', 'rejected']),
    also_approved: z.array(z.string()).meta({ description: 'Other actions approved by `approve_same_type` (empty otherwise).' }),
  }),
  z.object({
    operation_id: z.string().nullable().meta({ description: 'As sent; null when the entry had no operation_id string.' }),
    ok: z.literal(false),
    error: entryErrorSchema(['not_found', 'already_settled', 'invalid_decision']).meta({
      description: '`not_found`: no such action of yours (or it was closed because its session or agent is gone, or you left its workspace); `already_settled`: decided before, or closed by a cancel of its session; `invalid_decision`: the entry is malformed.',
    }),
  }),
]).meta({ id: 'DecisionResult' });
export type DecisionResult = z.infer<typeof DecisionResultSchema>;

export const AnswerResultSchema = z.union([
  z.object({
    request_id: z.string(),
    ok: z.literal(true),
    accepted: z.boolean().meta({ description: 'true: the question is answered and the mission goes on. false: it stays open and no turn is added.' }),
    reason: z.string().optional().meta({ description: 'When not accepted: what is still missing.', example: 'A number is missing: answer with digits, e.g. 42 or 3.5.' }),
  }),
  z.object({
    request_id: z.string().nullable().meta({ description: 'As sent; null when the entry had no request_id string.' }),
    ok: z.literal(false),
    error: z.object({
      code: z.enum(['not_found', 'already_answered']).meta({ description: '`not_found`: no such open question for you (or it was closed because its session or agent is gone, or its asker left the workspace), or the entry names none (not an object, or no `request_id` string; `message` says which); `already_answered`: an answer was accepted before, or it was closed by a cancel of its session.' }),
      message: z.string(),
    }),
  }),
]).meta({ id: 'AnswerResult' });
export type AnswerResult = z.infer<typeof AnswerResultSchema>;

/** One result per entry of a bulk request, in the entries' order. */
export const DecisionResultsSchema = z.object({ results: z.array(DecisionResultSchema) });
export type DecisionResults = z.infer<typeof DecisionResultsSchema>;
export const AnswerResultsSchema = z.object({ results: z.array(AnswerResultSchema) });
export type AnswerResults = z.infer<typeof AnswerResultsSchema>;

export const PendingActionSchema = z.object({
  operation_id: z.string().meta({ description: 'The action\'s id; also the idempotency key its tool runs with.', example: EXAMPLE_IDS.action }),
  kind: z.string().meta({ description: 'What kind of action (the tool that would run it).', example: 'email' }),
  summary: z.string().meta({ description: 'What the agent wants to do, in one line.', example: 'Send the report' }),
  details: z.record(z.string(), z.unknown()).meta({ description: 'Everything the tool would run with (an object).' }),
  session_id: z.string().meta({ description: 'The session whose transcript shows the outcome.' }),
  agent_id: z.string(),
  mission_id: z.string().meta({ description: 'The mission that waits for this decision.' }),
  created_at: z.string().meta({ description: 'When it was drafted (RFC 3339 UTC).' }),
}).meta({ id: 'PendingAction' });
export type PendingAction = z.infer<typeof PendingActionSchema>;

export const OpenQuestionSchema = z.object({
  request_id: z.string().meta({ description: 'The question\'s id; answer it with POST /questions/answers.', example: EXAMPLE_IDS.question }),
  text: z.string().meta({ description: 'The question.', example: 'How many copies?' }),
  session_id: z.string().meta({
    description: 'The session whose transcript shows the outcome. Only its owner (the mission\'s) can read that transcript: a question put to you on another member\'s mission names a session that is 404 session_not_found to you; `POST /questions/answers` tells you whether your answer was accepted.',
  }),
  agent_id: z.string(),
  mission_id: z.string().meta({ description: 'The mission that waits for the answer.' }),
  answer_type: z.string().meta({ description: 'The kind of answer that fits: text, number, date (YYYY-MM-DD), email, yesno, or choice:a|b|c.', example: 'number' }),
  asked_of: z.string().meta({ description: 'The user id the question was put to (you, or another member when the mission is yours).' }),
  created_at: z.string().meta({ description: 'When it was asked (RFC 3339 UTC).' }),
}).meta({ id: 'OpenQuestion' });
export type OpenQuestion = z.infer<typeof OpenQuestionSchema>;

export const PendingActionListSchema = z.object({
  actions: z.array(PendingActionSchema),
  has_more: z.boolean().meta({ description: 'Whether more actions follow this page: ask again with `after` set to the last `operation_id`. Always false without `limit` and `after` (the list is whole).' }),
});
export type PendingActionList = z.infer<typeof PendingActionListSchema>;

export const OpenQuestionListSchema = z.object({
  questions: z.array(OpenQuestionSchema),
  has_more: z.boolean().meta({ description: 'Whether more questions follow this page: ask again with `after` set to the last `request_id`. Always false without `limit` and `after` (the list is whole).' }),
});
export type OpenQuestionList = z.infer<typeof OpenQuestionListSchema>;

/** A field of an entry not checked yet, when it is a string: what a result for a malformed entry still names. */
export function stringField(entry: unknown, field: string): string | null {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return null;
  const value = (entry as Record<string, unknown>)[field];
  return typeof value === 'string' ? value : null;
}

/** What the agent waits for in a session (§9.2): an action awaiting permission, or a question awaiting an answer. */
export const AwaitingItemSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('action'), operation_id: z.string().meta({ example: EXAMPLE_IDS.action }), kind: z.string(), summary: z.string() }),
  z.object({ type: z.literal('question'), request_id: z.string().meta({ example: EXAMPLE_IDS.question }), text: z.string(), answer_type: z.string() }),
]).meta({ id: 'AwaitingItem' });
export type AwaitingItem = z.infer<typeof AwaitingItemSchema>;

export const AwaitingSchema = z.array(AwaitingItemSchema).meta({
  description: 'The session\'s open pending actions and open questions, oldest first; `[]` when the agent waits for nobody. Settle them with POST /actions/decisions and POST /questions/answers.',
});
