import { OpenQuestionListSchema } from '../../../services/missions/schemas.ts';
import { EXAMPLE_IDS } from '../../../domain/ids.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { COMMON_PROBLEMS, pageLimitOf, problemResponse, waitingListQuery, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

const ListQuestionsQuery = waitingListQuery({ plural: 'questions', singular: 'question', id: 'request_id', settled: 'answered', exampleId: EXAMPLE_IDS.question });

/** §6 Open questions: put to the caller, plus those on missions the caller owns. */
export function listQuestionsRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/questions', {
    schema: {
      operationId: 'listQuestions',
      tags: ['Missions'],
      summary: 'List open questions for you',
      description: 'Open questions put to you, plus every open question on a mission you own, whoever it was put to; oldest first: all of them, or a page at a time when you give `limit` or `after` (`has_more` then says whether more follow).',
      querystring: ListQuestionsQuery,
      response: {
        200: OpenQuestionListSchema.describe('The open questions put to you, or on missions you own, oldest first (a page of them when you give `limit` or `after`).'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        422: problemResponse('validation_failed: `limit` is not an integer from 1 to 200, `after` is not the request_id of a question put to you or on a mission of yours, or a parameter is given more than once or holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.missions.listQuestions(callerOf(request).userId, {
    sessionId: request.query.session_id, limit: pageLimitOf(request.query.limit), after: request.query.after,
  }));
}
