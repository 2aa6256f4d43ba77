import { z } from 'zod';
import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { COMMON_PROBLEMS, UNWANTED_BODY_PROBLEMS } from '../schemas.ts';
import { AgentSchema } from '../../../services/agents.ts';

/** §2 List agents: every agent of every workspace the caller belongs to. */
export function listAgentsRoute(app: ApiApp, ctx: ApiContext): void {
  app.get('/agents', {
    schema: {
      operationId: 'listAgents',
      tags: ['Agents'],
      summary: 'List the agents you can message',
      response: { 200: z.object({ agents: z.array(AgentSchema) }).describe('Every agent you can message: those of every workspace you belong to.'), ...COMMON_PROBLEMS, ...UNWANTED_BODY_PROBLEMS },
    },
  }, async (request) => ({ agents: await ctx.agents.listForUser(callerOf(request).userId) }));
}
