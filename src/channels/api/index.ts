import type { FastifyInstance } from 'fastify';
import type { RateLimiter } from '../../ratelimit/rate-limiter.ts';
import type { ApiApp, ApiContext } from './context.ts';
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

export { API_PREFIX } from './prefix.ts';

/** The API channel: bearer-key auth and rate limit around one file per route. */
export function apiChannel(ctx: ApiContext, rateLimiter: RateLimiter) {
  return async function register(scope: FastifyInstance): Promise<void> {
    installKeyAuth(scope, { keys: ctx.keys, rateLimiter, judgeGetBody: getBodyJudge(scope) });
    const app = scope as unknown as ApiApp;
    const routes = [
      listAgentsRoute, createAgentRoute, sendMessageRoute, readTranscriptRoute,
      listActionsRoute, decideActionsRoute, listQuestionsRoute, answerQuestionsRoute,
    ];
    for (const route of routes) route(app, ctx);
  };
}
