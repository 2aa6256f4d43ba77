import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { Problem } from '../../domain/problems.ts';
import type { RateLimiter } from '../../ratelimit/rate-limiter.ts';
import { isCrossSite } from '../cross-site.ts';
import { hangUpSignal } from '../hang-up.ts';
import { callerOf, installKeyAuth } from '../key-auth.ts';
import { sendProblem } from '../problem-reply.ts';
import type { McpServices } from './context.ts';
import { mcpServerFor, mcpTools } from './server.ts';

/** Where the MCP endpoint is served (contract §9.6: beside the API, not under its base path). */
export const MCP_PATH = '/mcp';

export interface McpChannelOptions {
  services: McpServices;
  rateLimiter: RateLimiter;
  /** The release, as the server names itself to clients. */
  version: string;
}

/**
 * The MCP channel: Streamable HTTP at /mcp, stateless (a server and a transport per request), on
 * the API's key check and rate limit. The tools call the same services as the API's routes.
 */
export function mcpChannel(options: McpChannelOptions) {
  const { services, rateLimiter, version } = options;
  return async function register(scope: FastifyInstance): Promise<void> {
    // A page of another site is refused before its key is looked at (the MCP specification's
    // Origin check, against DNS rebinding); clients that are not browsers send no Origin.
    scope.addHook('onRequest', async (request, reply) => {
      if (isCrossSite(request)) return sendProblem(request, reply, new Problem('forbidden', 'Requests from a page of another site are not accepted here.'));
    });
    installKeyAuth(scope, { keys: services.keys, rateLimiter });
    const tools = mcpTools(services);
    const closing = new AbortController();
    scope.addHook('preClose', (done) => { closing.abort(); done(); });

    // Unstorable text is judged by each tool, so that it is the tool's isError result (§9.6), not a 422 of the request.
    scope.post(MCP_PATH, { config: { perEntryTextCheck: true }, schema: { hide: true } }, async (request, reply) => {
      const hangUp = hangUpSignal(request, reply);
      const userId = callerOf(request).userId;
      const server = mcpServerFor(tools, version, (mcp) => ({
        userId, requestId: request.id, log: request.log, mcp, signal: AbortSignal.any([mcp.mcpReq.signal, hangUp]), shutdown: closing.signal,
      }));
      const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      await server.connect(transport);
      reply.raw.once('close', () => { void transport.close(); void server.close(); });
      handOver(reply);
      await transport.handleRequest(request.raw, reply.raw, request.body);
    });
    // A stateless server opens no stream (GET) and holds no session to end (DELETE): as the SDK's stateless servers answer.
    const notAllowed = async (_request: FastifyRequest, reply: FastifyReply) => reply.code(405).header('Allow', 'POST')
      .send({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this server is stateless; send each request as a POST.' }, id: null });
    scope.get(MCP_PATH, { schema: { hide: true } }, notAllowed);
    scope.delete(MCP_PATH, { schema: { hide: true } }, notAllowed);
  };
}

/**
 * Gives the response to the SDK's transport, which writes it itself. Fastify then writes none of
 * its headers (onSend is skipped): the ones the hooks set (X-Request-Id, the rate limit) go on the
 * raw response now. The access log and metrics still see the answer (onResponse follows the
 * response's end, hijacked or not).
 */
function handOver(reply: FastifyReply): void {
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) reply.raw.setHeader(name, value as string | number | string[]);
  }
  reply.hijack();
}
