import { DecisionEntrySchema, DecisionResultsSchema } from '../../../services/missions/schemas.ts';
import { bulkBody, bulkEntries } from '../../bulk-body.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, problemResponse } from '../schemas.ts';

/** §5 Decide on pending actions, 1–100 at a time; one result per entry, in order. */
export function decideActionsRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/actions/decisions', {
    // Unstorable text (U+0000, a lone surrogate) fails only the entry holding it (invalid_decision), not the request.
    config: { perEntryTextCheck: true },
    schema: {
      operationId: 'decideActions',
      tags: ['Missions'],
      summary: 'Approve or reject pending actions',
      description: 'Settles each entry on its own: one bad entry never fails the others. An approval runs the action and the mission goes on; '
        + 'a rejection with a reason makes the agent re-plan, without one it stops the mission. Each outcome appears as an agent turn in the '
        + 'session\'s transcript. When two decisions race on one action, exactly one wins; the other gets `already_settled`. '
        + 'An entry whose `operation_id` or `reason` holds the NUL character (U+0000) or a lone UTF-16 surrogate is `invalid_decision` (a field no route reads is ignored).',
      body: bulkBody('decisions', DecisionEntrySchema, 'A JSON array of 1–100 decisions, or `{ "decisions": [...] }`.'),
      response: {
        200: DecisionResultsSchema.describe('One result per entry, in order; one bad entry never fails the others.'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        422: problemResponse('validation_failed: the body is not an array (or `{decisions}`) of 1–100 entries'),
      },
    },
  }, async (request) => ctx.missions.decide(callerOf(request).userId, bulkEntries(request.body, 'decisions')));
}
