import type { FastifyInstance } from 'fastify';
import type { RateLimiter } from '../../ratelimit/rate-limiter.ts';
import sseModule, { type SSEPluginOptions } from '@fastify/sse';
import type { FastifyPluginAsync } from 'fastify';
import type { ApiApp, ApiServices } from './context.ts';
import { EventStreams } from './event-streams.ts';
import { installKeyAuth } from './plugins/auth.ts';
import { getBodyJudge } from '../json-body.ts';
import { listAgentsRoute } from './routes/agents.list.ts';
import { createAgentRoute } from './routes/agents.create.ts';
import { sendMessageRoute } from './routes/messages.send.ts';
import { readTranscriptRoute } from './routes/sessions.messages.ts';
import { listActionsRoute } from './routes/actions.list.ts';
import { decideActionsRoute } from './routes/actions.decide.ts';
import { listQuestionsRoute } from './routes/questions.list.ts';
import { answerQuestionsRoute } from './routes/questions.answer.ts';
import { listEventsRoute } from './routes/events.list.ts';
import { cancelSessionRoute } from './routes/sessions.cancel.ts';

export { API_PREFIX } from './prefix.ts';

// The package's CommonJS export is the plugin itself (wrapped so its route hook sees our routes);
// its type declarations describe an ES module whose default is that plugin.
const fastifySse = sseModule as unknown as FastifyPluginAsync<SSEPluginOptions>;

/** The API channel: bearer-key auth and rate limit around one file per route. */
export function apiChannel(services: ApiServices, rateLimiter: RateLimiter) {
  return async function register(scope: FastifyInstance): Promise<void> {
    installKeyAuth(scope, { keys: services.keys, rateLimiter, judgeGetBody: getBodyJudge(scope) });
    // A comment line every 10 s keeps a quiet stream (and the proxies on its way) open (§9.3: at most every 15 s).
    await scope.register(fastifySse, { heartbeatInterval: 10_000 });
    const streams = new EventStreams();
    // Streams and held reads end as the server starts closing: their clients reconnect elsewhere or after the restart.
    scope.addHook('preClose', (done) => { streams.shutDown(); done(); });
    const ctx = { ...services, streams };
    const app = scope as unknown as ApiApp;
    const routes = [
      listAgentsRoute, createAgentRoute, sendMessageRoute, readTranscriptRoute,
      listActionsRoute, decideActionsRoute, listQuestionsRoute, answerQuestionsRoute,
      listEventsRoute, cancelSessionRoute,
    ];
    for (const route of routes) route(app, ctx);
  };
}
