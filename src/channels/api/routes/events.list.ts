import { z } from 'zod';
import { PAGE_LIMIT } from '../../../domain/paging.ts';
import { FeedPageSchema } from '../../../services/feed.ts';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { heldWait } from '../prefer-wait.ts';
import { COMMON_PROBLEMS, pageLimitOf, pageLimitParam, problemResponse, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';
import type { RouteResponseHeaders } from '../openapi.ts';
import { hangUpSignal } from '../../hang-up.ts';

const EventsQuery = z.object({
  after: z.string().optional().meta({ description: 'An event `id`: only later events (the oldest kept without it). Older than the retention: 410 `cursor_expired`.', example: 'evt_1042' }),
  limit: pageLimitParam('Events'),
  session_id: z.string().optional().meta({ description: 'Only this session\'s events; another account\'s session is 404 `session_not_found`.' }),
});

const EventsHeaders = z.object({
  prefer: z.string().optional().meta({ description: 'RFC 7240 `wait=N`: with nothing after `after`, hold the request up to N seconds (capped by the server ceiling) until an event exists.' }),
  'last-event-id': z.string().optional().meta({ description: 'Stream only: resume after this event (an EventSource sends it when it reconnects).' }),
});

/** §9.3 The event feed: a page as JSON (long-polled with `Prefer: wait`), or a Server-Sent Events stream. */
export function listEventsRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/events', {
    sse: { kind: 'dual', heartbeat: true },
    schema: {
      operationId: 'listEvents',
      tags: ['Events'],
      summary: 'Read the event feed, or stream it',
      description: 'JSON: a page of your events after `after`, oldest first (`Prefer: wait=N` holds the request until one exists). '
        + 'With `Accept: text/event-stream`: a Server-Sent Events stream (`id`, `event` = the type, `data` = the event), starting after `Last-Event-ID`, else after `after`, else with the next new event; '
        + `a comment line at least every 15 s; at most 10 open streams per key (the next: 429 \`too_many_streams\`). Events are kept for EVENT_RETENTION_HOURS (168 by default).`,
      querystring: EventsQuery,
      headers: EventsHeaders,
      response: {
        200: FeedPageSchema.describe(`A page of events, at most \`limit\` (${PAGE_LIMIT.default} by default); has_more says whether more follow. As a stream: text/event-stream.`),
        ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS,
        404: problemResponse('session_not_found: `session_id` is not one of yours.'),
        410: problemResponse('cursor_expired: `after` or `Last-Event-ID` is older than the oldest event kept; read again without it.'),
        422: problemResponse('validation_failed: `after` or `Last-Event-ID` is not the id of one of your events, `limit` is not an integer from 1 to 200, or a parameter is given more than once.'),
        429: problemResponse('rate_limited (see Retry-After), or too_many_streams: the key already holds 10 open streams.'),
      },
    },
    config: { responseHeaders: { 200: ['Preference-Applied'] } satisfies RouteResponseHeaders },
  }, async (request, reply) => {
    const caller = callerOf(request);
    const { after, session_id: sessionId } = request.query;
    const limit = pageLimitOf(request.query.limit);
    const gone = AbortSignal.any([hangUpSignal(request, reply), ctx.streams.shutdownSignal]);
    if (!reply.sse) {
      const hold = heldWait(request.headers.prefer, ctx.conversations.waitCeilingMs);
      const page = await ctx.feed.read(caller.userId, { after, limit, sessionId }, { waitMs: hold?.waitMs ?? 0, signal: gone });
      // Only a read that was answered had its wait applied; a refused one (404, 410, 422) held nothing.
      if (hold) reply.header('Preference-Applied', hold.applied);
      return page;
    }
    const release = ctx.streams.open(caller.keyId);
    try {
      const position = await ctx.feed.streamStart(caller.userId, { lastEventId: request.headers['last-event-id'], after, limit, sessionId });
      // A problem found so far is a plain answer; from here on the stream is open.
      reply.sse.sendHeaders();
      // Now, not with the first event or heartbeat: the client knows at once that its stream is open.
      reply.raw.flushHeaders();
      for await (const events of ctx.feed.follow(caller.userId, position, { sessionId, signal: gone })) {
        for (const event of events) {
          if (!reply.sse.isConnected) return;
          await reply.sse.send({ id: event.id, event: event.type, data: event });
        }
      }
    } finally {
      release();
    }
  });
}
