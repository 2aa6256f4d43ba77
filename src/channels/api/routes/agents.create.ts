import type { ApiApp, ApiContext } from '../context.ts';
import { callerOf } from '../../key-auth.ts';
import { BODY_PROBLEMS, COMMON_PROBLEMS, problemResponse } from '../schemas.ts';
import { AgentSchema, CreateAgentSchema } from '../../../services/agents.ts';

/** §3 Create an agent, in the personal workspace unless another is named. */
export function createAgentRoute(app: ApiApp, ctx: ApiContext): void {
  app.post('/agents', {
    schema: {
      operationId: 'createAgent',
      tags: ['Agents'],
      summary: 'Create an agent',
      description: 'Checks in order: body (422 validation_failed, `errors` naming each field), workspace (404 workspace_not_found), role (403 forbidden), plan (403 agent_limit_reached).',
      body: CreateAgentSchema,
      response: {
        201: AgentSchema.describe('The agent, created.'),
        ...COMMON_PROBLEMS,
        ...BODY_PROBLEMS,
        403: problemResponse('forbidden (not owner/admin of the workspace) or agent_limit_reached.'),
        404: problemResponse('workspace_not_found'),
      },
    },
  }, async (request, reply) => {
    const agent = await ctx.agents.create(callerOf(request).userId, request.body);
    return reply.code(201).send(agent);
  });
}
