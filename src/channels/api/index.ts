import type { FastifyInstance } from 'fastify';
import type { RateLimiter } from '../../ratelimit/rate-limiter.ts';
import type { ApiApp, ApiServices } from './context.ts';
import { installEventStreams, MAX_STREAMS_PER_HOLDER } from '../event-streams.ts';
import { installKeyAuth } from '../key-auth.ts';
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

export { API_PREFIX } from '../api-prefix.ts';

/** The API channel: bearer-key auth and rate limit around one file per route. */
export function apiChannel(services: ApiServices, rateLimiter: RateLimiter) {
  return async function register(scope: FastifyInstance): Promise<void> {
    installKeyAuth(scope, { keys: services.keys, rateLimiter, judgeGetBody: getBodyJudge(scope) });
    // Its shutdown signal ends the held reads as well as the streams.
    const streams = await installEventStreams(scope, `This key already holds ${MAX_STREAMS_PER_HOLDER} open event streams: close one, or share one stream between readers.`);
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
