import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { TS_PATTERN } from '../../../domain/turn-clock.ts';
import { TranscriptSchema } from '../../../services/conversations/schemas.ts';
import { callerOf } from '../plugins/auth.ts';
import { COMMON_PROBLEMS, pageLimitOf, pageLimitParam, problemResponse, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';

const TranscriptQuery = z.object({
  // Validated by the transcript (a real date and time, in the one format a ts has); the pattern documents the format.
  after: z.string().max(64).optional().meta({
    description: 'A turn `ts` (RFC 3339 UTC with exactly six fractional digits); only newer turns are returned.',
    example: '2026-11-22T12:34:56.789012Z', pattern: TS_PATTERN.source,
  }),
  limit: pageLimitParam('Turns'),
});

/** §4 Read a transcript, oldest first, paging with `after`. */
export function readTranscriptRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/sessions/:session_id/messages', {
    schema: {
      operationId: 'readTranscript',
      tags: ['Messages'],
      summary: 'Read a session\'s transcript',
      params: z.object({ session_id: z.string().meta({ description: 'The `session_id` a `POST /messages` answered with (the `Location` of a 202 is this URL). Another account\'s session is 404, as a missing one is.' }) }),
      querystring: TranscriptQuery,
      response: {
        200: TranscriptSchema.describe('A page of the transcript, oldest first; has_more says whether a later page exists.'),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        404: problemResponse('session_not_found (also for another account\'s session)'),
        422: problemResponse('validation_failed: `after` is not a turn ts, `limit` is not an integer from 1 to 200, or a parameter is given more than once or (like the session id) holds the NUL character (U+0000) or a lone UTF-16 surrogate.'),
      },
    },
  }, async (request) => ctx.conversations.transcript(callerOf(request).userId, request.params.session_id, {
    after: request.query.after,
    limit: pageLimitOf(request.query.limit),
  }));
}
