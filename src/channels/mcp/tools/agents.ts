import { z } from 'zod';
import { AgentSchema, CreateAgentSchema } from '../../../services/agents.ts';
import type { McpServices } from '../context.ts';
import type { ToolDefinition } from '../tool.ts';

/** §2 as a tool: the agents the caller can message. */
export const listAgentsTool = (services: McpServices): ToolDefinition<z.ZodObject, z.ZodObject> => ({
  name: 'list_agents',
  title: 'List agents',
  description: 'Lists the agents you can message (those of every workspace you belong to): `agent_id`, `name`, `workspace_id`. '
    + 'Give an `agent_id` to send_message to start a conversation with one; with a single agent you may leave it out.',
  input: z.object({}),
  output: z.object({ agents: z.array(AgentSchema) }),
  annotations: { readOnlyHint: true, openWorldHint: false },
  run: async (_args, call) => ({ agents: await services.agents.listForUser(call.userId) }),
});

/** §3 as a tool: an agent in the caller's personal workspace, or in `workspace_id`. */
export const createAgentTool = (services: McpServices): ToolDefinition<typeof CreateAgentSchema, typeof AgentSchema> => ({
  name: 'create_agent',
  title: 'Create an agent',
  description: 'Creates an agent named `agent_name` (1–100 characters) in your personal workspace, or in `workspace_id` where you are owner or admin. '
    + 'Fails with agent_limit_reached when your plan allows no more agents (free: one).',
  input: CreateAgentSchema,
  output: AgentSchema,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  run: (args, call) => services.agents.create(call.userId, args),
});
