import { z } from 'zod';
import { CancelResultSchema } from '../../../services/conversations/cancelling.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { COMMON_PROBLEMS, problemResponse, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

/** §9.4 Cancel a session's work. */
export function cancelSessionRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/sessions/:session_id/cancel', {
    schema: {
      operationId: 'cancelSession',
      tags: ['Messages'],
      summary: 'Cancel a session\'s queued and running messages',
      description: 'No body. Queued messages leave the agent\'s line and the running turn is stopped (a model call under way is aborted); each gets an agent turn `Cancelled.` with `"error": "cancelled"` and a `turn.cancelled` event, and a send still waiting for one is answered 200 `completed` with that reply. '
        + 'The session\'s open actions and questions are closed (settling one then gives `already_settled` / `already_answered`). An approved action whose tool already ran is not undone.',
      params: z.object({ session_id: z.string().meta({ description: 'Your session; another account\'s is 404, as a missing one is.' }) }),
      response: {
        200: CancelResultSchema.describe('How many messages were cancelled (0 when nothing was queued or running).'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        404: problemResponse('session_not_found (also for another account\'s session)'),
        422: problemResponse('validation_failed: the session id holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.conversations.cancel(callerOf(request).userId, request.params.session_id));
}
