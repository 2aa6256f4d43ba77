import { McpServer, type ServerContext } from '@modelcontextprotocol/server';
import type { McpServices } from './context.ts';
import type { z } from 'zod';
import { registerTool, type ToolCall, type ToolDefinition } from './tool.ts';
import { createAgentTool, listAgentsTool } from './tools/agents.ts';
import { cancelTool, getMessagesTool, sendMessageTool } from './tools/conversations.ts';
import { answerQuestionsTool, decideActionsTool, listActionsTool, listQuestionsTool } from './tools/missions.ts';

const INSTRUCTIONS = 'Talk to AI agents: send_message sends a message and returns the reply, or `processing` when the agent takes longer '
  + '(then get_messages with after = message_ts and wait_seconds receives it). When a result\'s `awaiting` is not empty the agent waits for '
  + 'a person: decide_actions approves or rejects its actions, answer_questions answers its questions. cancel stops a conversation\'s work.';

/** The tools of contract §9.6, defined once: nothing in a definition depends on the request. */
export function mcpTools(services: McpServices): ToolDefinition<z.ZodType, z.ZodType>[] {
  return [
    listAgentsTool(services), createAgentTool(services), sendMessageTool(services), getMessagesTool(services),
    listActionsTool(services), decideActionsTool(services), listQuestionsTool(services), answerQuestionsTool(services),
    cancelTool(services),
  ] as ToolDefinition<z.ZodType, z.ZodType>[];
}

/**
 * A server of `tools` for one HTTP request (the endpoint is stateless: a server per request),
 * acting as the caller the request's key names.
 */
export function mcpServerFor(tools: readonly ToolDefinition<z.ZodType, z.ZodType>[], version: string, callOf: (mcp: ServerContext) => ToolCall): McpServer {
  const server = new McpServer({ name: 'agent-channel', version }, { instructions: INSTRUCTIONS });
  for (const tool of tools) registerTool(server, tool, callOf);
  return server;
}
