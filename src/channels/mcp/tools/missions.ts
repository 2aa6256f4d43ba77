import { z } from 'zod';
import { MAX_BULK_ENTRIES, bulkEntries } from '../../bulk-body.ts';
import {
  AnswerEntrySchema, AnswerResultsSchema, DecisionEntrySchema, DecisionResultsSchema, OpenQuestionListSchema, PendingActionListSchema,
} from '../../../services/missions/schemas.ts';
import type { McpServices } from '../context.ts';
import type { ToolDefinition } from '../tool.ts';

const sessionFilter = z.object({ session_id: z.string().optional().meta({ description: 'Only those of this session.' }) });

/** §5 as a tool: the actions awaiting the caller's permission. */
export const listActionsTool = (services: McpServices) => ({
  name: 'list_actions',
  title: 'List actions awaiting your permission',
  description: 'Lists the actions agents drafted on your missions that wait for your decision, oldest first: `operation_id`, `kind`, `summary`, '
    + '`details` (what would run), `session_id`. Approve or reject them with decide_actions.',
  input: sessionFilter,
  output: PendingActionListSchema,
  annotations: { readOnlyHint: true, openWorldHint: false },
  run: (args, call) => services.missions.listActions(call.userId, { sessionId: args.session_id }),
}) satisfies ToolDefinition<typeof sessionFilter, typeof PendingActionListSchema>;

const decisionsInput = z.object({ decisions: z.array(DecisionEntrySchema).min(1).max(MAX_BULK_ENTRIES) });

/** §5 as a tool: settles 1–100 actions, one result per entry. */
export const decideActionsTool = (services: McpServices) => ({
  name: 'decide_actions',
  title: 'Approve or reject actions',
  description: 'Settles pending actions, 1–100 at a time, each on its own (one bad entry never fails the others): `approve` runs the action and '
    + 'the mission goes on; `approve_same_type` also approves every other pending action of the same kind for that agent; `reject` with a '
    + '`reason` makes the agent re-plan around it, without one it stops the mission. Ask the user before approving: an approved action runs '
    + 'for real. Each outcome appears as an agent turn in the session (read it with get_messages).',
  input: decisionsInput,
  output: DecisionResultsSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  // The envelope is the tool's to judge; each entry is the service's, so that a bad one fails alone.
  parse: (args: unknown) => ({ decisions: bulkEntries(args, 'decisions') }) as z.infer<typeof decisionsInput>,
  run: (args, call) => services.missions.decide(call.userId, args.decisions),
}) satisfies ToolDefinition<typeof decisionsInput, typeof DecisionResultsSchema>;

const noArguments = z.object({});

/** §6 as a tool: the open questions put to the caller or on the caller's missions. */
export const listQuestionsTool = (services: McpServices) => ({
  name: 'list_questions',
  title: 'List questions for you',
  description: 'Lists the open questions put to you, and those on your missions whoever they were put to, oldest first: `request_id`, `text`, '
    + '`answer_type` (text, number, date as YYYY-MM-DD, email, yesno, or choice:a|b|c), `session_id`. Answer them with answer_questions.',
  input: noArguments,
  output: OpenQuestionListSchema,
  annotations: { readOnlyHint: true, openWorldHint: false },
  run: (_args, call) => services.missions.listQuestions(call.userId, {}),
}) satisfies ToolDefinition<typeof noArguments, typeof OpenQuestionListSchema>;

const answersInput = z.object({ answers: z.array(AnswerEntrySchema).min(1).max(MAX_BULK_ENTRIES) });

/** §6 as a tool: answers 1–100 questions, one result per entry. */
export const answerQuestionsTool = (services: McpServices) => ({
  name: 'answer_questions',
  title: 'Answer questions',
  description: 'Answers open questions, 1–100 at a time, each on its own. The agent judges each answer: `accepted: true` and the mission goes on; '
    + '`accepted: false` with a `reason` naming what is missing (the question stays open: answer again). The first accepted answer wins.',
  input: answersInput,
  output: AnswerResultsSchema,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  parse: (args: unknown) => ({ answers: bulkEntries(args, 'answers') }) as z.infer<typeof answersInput>,
  run: (args, call) => services.missions.answer(call.userId, args.answers),
}) satisfies ToolDefinition<typeof answersInput, typeof AnswerResultsSchema>;
