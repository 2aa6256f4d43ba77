import { AnswerEntrySchema, AnswerResultsSchema } from '../../../services/missions/schemas.ts';
import { bulkBody, bulkEntries } from '../../bulk-body.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, problemResponse } from '../schemas.ts';

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
      body: bulkBody('answers', AnswerEntrySchema, 'A JSON array of 1–100 answers, or `{ "answers": [...] }`.'),
      response: {
        200: AnswerResultsSchema.describe('One result per entry, in order; one bad entry never fails the others.'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        422: problemResponse('validation_failed: the body is not an array (or `{answers}`) of 1–100 entries'),
      },
    },
  }, async (request) => ctx.missions.answer(callerOf(request).userId, bulkEntries(request.body, 'answers')));
}
