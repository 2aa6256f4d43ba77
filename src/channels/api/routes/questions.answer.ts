import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../plugins/auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, EXAMPLE_IDS, problemResponse } from '../schemas.ts';
import { bulkBody } from './actions.decide.ts';

export const AnswerEntryDoc = z.object({
  request_id: z.string().meta({ description: 'The question to answer (from GET /questions).', example: EXAMPLE_IDS.question }),
  text: z.string().meta({ description: 'Your answer. The agent judges whether it fits the question.', example: '12' }),
});

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
      code: z.enum(['not_found', 'already_answered']).meta({ description: '`not_found`: no such open question for you (or it was closed), or the entry names none (not an object, or no `request_id` string; `message` says which); `already_answered`: an answer was accepted before.' }),
      message: z.string(),
    }),
  }),
]).meta({ id: 'AnswerResult' });

/** §6 Answer open questions, 1–100 at a time; one result per entry, in order. */
export function answerQuestionsRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/questions/answers', {
    // Unstorable text (U+0000, a lone surrogate) fails only the entry holding it, not the request.
    config: { perEntryTextCheck: true },
    schema: {
      operationId: 'answerQuestions',
      tags: ['Missions'],
      summary: 'Answer open questions',
      description: 'The person asked and the mission\'s owner may both answer; the first accepted answer wins and resumes the mission exactly once. '
        + 'An answer that does not fit is refused (`accepted: false`) with a reason naming what is missing; so is one whose `text` '
        + 'holds the NUL character (U+0000) or a lone UTF-16 surrogate. A `request_id` holding one is `not_found`. '
        + 'Entries are judged up to 8 at once (a model-backed agent judges text answers with a model call), answers to one question '
        + 'one after the other; accepted answers are recorded in the entries\' order, so the missions resume in that order.',
      body: bulkBody('answers', AnswerEntryDoc, 'A JSON array of 1–100 answers, or `{ "answers": [...] }`.'),
      response: {
        200: z.object({ results: z.array(AnswerResultSchema) }).describe('One result per entry, in order; one bad entry never fails the others.'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        422: problemResponse('validation_failed: the body is not an array (or `{answers}`) of 1–100 entries'),
      },
    },
  }, async (request) => ctx.missions.answer(callerOf(request).userId, request.body));
}
