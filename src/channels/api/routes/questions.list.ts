import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../plugins/auth.ts';
import { COMMON_PROBLEMS, EXAMPLE_IDS, pageLimitOf, problemResponse, waitingListQuery, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

export const QuestionSchema = z.object({
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
        200: z.object({
          questions: z.array(QuestionSchema),
          has_more: z.boolean().meta({ description: 'Whether more questions follow this page: ask again with `after` set to the last `request_id`. Always false without `limit` and `after` (the list is whole).' }),
        }).describe('The open questions put to you, or on missions you own, oldest first (a page of them when you give `limit` or `after`).'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        422: problemResponse('validation_failed: `limit` is not an integer from 1 to 200, `after` is not the request_id of a question put to you or on a mission of yours, or a parameter is given more than once or holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.missions.listQuestions(callerOf(request).userId, {
    sessionId: request.query.session_id, limit: pageLimitOf(request.query.limit), after: request.query.after,
  }));
}
