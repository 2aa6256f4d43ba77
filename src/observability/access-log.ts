import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * What every access-log line says of its request (the query string left out: it may be long).
 * Written through the server's logger with the request id as a field, the line a child bound to
 * the id would write: most requests log nothing else, and need no child (see RequestLogger).
 */
export function accessLogFields(request: FastifyRequest, reply: FastifyReply): { reqId: string; method: string; url: string | undefined; ms: number } {
  return { reqId: request.id, method: request.method, url: request.url.split('?')[0], ms: Math.round(reply.elapsedTime * 100) / 100 };
}
