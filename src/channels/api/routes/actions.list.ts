import { PendingActionListSchema } from '../../../services/missions/schemas.ts';
import { EXAMPLE_IDS } from '../../../domain/ids.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { COMMON_PROBLEMS, pageLimitOf, problemResponse, waitingListQuery, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

const ListActionsQuery = waitingListQuery({ plural: 'actions', singular: 'action', id: 'operation_id', settled: 'settled', exampleId: EXAMPLE_IDS.action });

/** §5 Pending actions: what waits for the caller's permission, oldest first. */
export function listActionsRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/actions', {
    schema: {
      operationId: 'listActions',
      tags: ['Missions'],
      summary: 'List actions awaiting your permission',
      description: 'Actions that agents drafted on missions you own and that wait for your decision, oldest first: all of them, or a page at a time when you give `limit` or `after` (`has_more` then says whether more follow).',
      querystring: ListActionsQuery,
      response: {
        200: PendingActionListSchema.describe('The actions awaiting your decision, oldest first (a page of them when you give `limit` or `after`).'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        422: problemResponse('validation_failed: `limit` is not an integer from 1 to 200, `after` is not the operation_id of an action of yours, or a parameter is given more than once or holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.missions.listActions(callerOf(request).userId, {
    sessionId: request.query.session_id, limit: pageLimitOf(request.query.limit), after: request.query.after,
  }));
}
