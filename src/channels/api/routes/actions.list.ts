import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../plugins/auth.ts';
import { COMMON_PROBLEMS, EXAMPLE_IDS, pageLimitOf, problemResponse, waitingListQuery, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

export const ActionSchema = z.object({
  operation_id: z.string().meta({ description: 'The action\'s id; also the idempotency key its tool runs with.', example: EXAMPLE_IDS.action }),
  kind: z.string().meta({ description: 'What kind of action (the tool that would run it).', example: 'email' }),
  summary: z.string().meta({ description: 'What the agent wants to do, in one line.', example: 'Send the report' }),
  details: z.record(z.string(), z.unknown()).meta({ description: 'Everything the tool would run with (an object).' }),
  session_id: z.string().meta({ description: 'The session whose transcript shows the outcome.' }),
  agent_id: z.string(),
  mission_id: z.string().meta({ description: 'The mission that waits for this decision.' }),
  created_at: z.string().meta({ description: 'When it was drafted (RFC 3339 UTC).' }),
}).meta({ id: 'PendingAction' });

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
        200: z.object({
          actions: z.array(ActionSchema),
          has_more: z.boolean().meta({ description: 'Whether more actions follow this page: ask again with `after` set to the last `operation_id`. Always false without `limit` and `after` (the list is whole).' }),
        }).describe('The actions awaiting your decision, oldest first (a page of them when you give `limit` or `after`).'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        422: problemResponse('validation_failed: `limit` is not an integer from 1 to 200, `after` is not the operation_id of an action of yours, or a parameter is given more than once or holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.missions.listActions(callerOf(request).userId, {
    sessionId: request.query.session_id, limit: pageLimitOf(request.query.limit), after: request.query.after,
  }));
}
