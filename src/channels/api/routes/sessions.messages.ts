import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { TranscriptSchema, TurnCursorSchema } from '../../../services/conversations/schemas.ts';
import { callerOf } from '../../key-auth.ts';
import { heldWait } from '../prefer-wait.ts';
import type { RouteResponseHeaders } from '../openapi.ts';
import { hangUpSignal } from '../../hang-up.ts';
import { COMMON_PROBLEMS, pageLimitOf, pageLimitParam, problemResponse, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

const TranscriptQuery = z.object({
  after: TurnCursorSchema.optional(),
  limit: pageLimitParam('Turns'),
});

const TranscriptHeaders = z.object({
  prefer: z.string().optional().meta({
    description: 'RFC 7240 `wait=N`, with `after`: when no turn newer than `after` exists yet, hold the request until one is written (answered at once then) or N seconds pass (capped by the server ceiling; then `messages: []` and the current status).',
  }),
});

/** §4 Read a transcript, oldest first, paging with `after`; §9.1 held with `Prefer: wait` until a newer turn exists. */
export function readTranscriptRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/sessions/:session_id/messages', {
    schema: {
      operationId: 'readTranscript',
      tags: ['Messages'],
      summary: 'Read a session\'s transcript',
      params: z.object({ session_id: z.string().meta({ description: 'The `session_id` a `POST /messages` answered with (the `Location` of a 202 is this URL). Another account\'s session is 404, as a missing one is.' }) }),
      querystring: TranscriptQuery,
      headers: TranscriptHeaders,
      response: {
        200: TranscriptSchema.describe('A page of the transcript, oldest first; has_more says whether a later page exists.'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        404: problemResponse('session_not_found (also for another account\'s session)'),
        422: problemResponse('validation_failed: `after` is not a turn ts, `limit` is not an integer from 1 to 200, or a parameter is given more than once or (like the session id) holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
    config: { responseHeaders: { 200: ['Preference-Applied'] } satisfies RouteResponseHeaders },
  }, async (request, reply) => {
    const { after } = request.query;
    // Only a read after a turn is held (§9.1): without `after` there is nothing to wait past.
    const hold = after === undefined ? null : heldWait(request.headers.prefer, ctx.conversations.waitCeilingMs);
    const page = await ctx.conversations.transcript(callerOf(request).userId, request.params.session_id, { after, limit: pageLimitOf(request.query.limit) },
      hold ? { waitMs: hold.waitMs, signal: AbortSignal.any([hangUpSignal(request, reply), ctx.streams.shutdownSignal]) } : undefined);
    // Only a read that was answered had its wait applied; a refused one (404, 422) held nothing.
    if (hold) reply.header('Preference-Applied', hold.applied);
    return page;
  });
}
