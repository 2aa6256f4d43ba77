import { McpServer, type ServerContext } from '@modelcontextprotocol/server';
import type { McpServices } from './context.ts';
import { registerTool, type ToolCall } from './tool.ts';
import { createAgentTool, listAgentsTool } from './tools/agents.ts';
import { cancelTool, getMessagesTool, sendMessageTool } from './tools/conversations.ts';
import { answerQuestionsTool, decideActionsTool, listActionsTool, listQuestionsTool } from './tools/missions.ts';

const INSTRUCTIONS = 'Talk to AI agents: send_message sends a message and returns the reply, or `processing` when the agent takes longer '
  + '(then get_messages with after = message_ts and wait_seconds receives it). When a result\'s `awaiting` is not empty the agent waits for '
  + 'a person: decide_actions approves or rejects its actions, answer_questions answers its questions. cancel stops a conversation\'s work.';

/**
 * The tools of contract §9.6 for one HTTP request (the endpoint is stateless: a server per
 * request), acting as the caller the request's key names.
 */
export function mcpServerFor(services: McpServices, version: string, callOf: (mcp: ServerContext) => ToolCall): McpServer {
  const server = new McpServer({ name: 'agent-channel', version }, { instructions: INSTRUCTIONS });
  registerTool(server, listAgentsTool(services), callOf);
  registerTool(server, createAgentTool(services), callOf);
  registerTool(server, sendMessageTool(services), callOf);
  registerTool(server, getMessagesTool(services), callOf);
  registerTool(server, listActionsTool(services), callOf);
  registerTool(server, decideActionsTool(services), callOf);
  registerTool(server, listQuestionsTool(services), callOf);
  registerTool(server, answerQuestionsTool(services), callOf);
  registerTool(server, cancelTool(services), callOf);
  return server;
}
