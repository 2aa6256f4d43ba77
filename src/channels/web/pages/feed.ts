import type { FastifyInstance } from 'fastify';
import { hangUpSignal } from '../../hang-up.ts';
import type { WebContext } from '../context.ts';
import { SESSION_COOKIE } from '../cookies.ts';

/**
 * The signed-in person's event feed (contract §9.3) as Server-Sent Events, for the pages' script
 * (app.js), which reads a conversation again when an event names it instead of polling.
 *
 * A stream starts with the next new event, and its events carry no id (so an EventSource that
 * reconnects sends no Last-Event-ID): the script reads what it shows afresh each time its stream
 * opens, which covers whatever happened while it was away, and no cursor of a tab left open for
 * days can have expired.
 */
export function feedRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/events/stream', { sse: { kind: 'only', heartbeat: true } }, async (request, reply) => {
    const signedIn = request.webSession;
    // Not the log-in page: an EventSource cannot follow there. It stops, and the script learns
    // why when it reads the transcript (which sends the page to log in).
    if (!signedIn) return reply.code(401).send({ error: 'not_signed_in', message: 'Log in again.' });
    const { userId } = signedIn;
    const release = ctx.streams.open(userId);
    try {
      const gone = AbortSignal.any([hangUpSignal(request, reply), ctx.streams.shutdownSignal]);
      const position = await ctx.services.feed.streamStart(userId, {});
      reply.sse.sendHeaders();
      reply.raw.flushHeaders(); // now, not with the first event or heartbeat: the page reads once it is open
      for await (const events of ctx.services.feed.follow(userId, position, { signal: gone })) {
        // Logged out (here or in another tab) or timed out since the stream opened: nothing more
        // goes to this browser. Looked at only when there is something to send, so that an idle
        // tab left open does not keep its session alive.
        const still = await ctx.services.webSessions.resolve(request.cookies[SESSION_COOKIE]);
        if (still?.userId !== userId) return;
        for (const event of events) {
          if (!reply.sse.isConnected) return;
          await reply.sse.send({ data: event });
        }
      }
    } finally {
      release();
    }
  });
}
