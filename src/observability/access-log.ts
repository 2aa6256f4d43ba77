import type { FastifyReply, FastifyRequest } from 'fastify';

/** One access-log line's fields; `status` once an answer was written. */
interface AccessLine { reqId: string; method: string; url: string; ms: number; status?: number }

/**
 * Writes a request's access-log line (the query string left out: it may be long), through the
 * server's logger with the request id as a field: the line a child bound to the id would write,
 * and most requests log nothing else, so they need no child (see RequestLogger).
 */
export function logAccess(request: FastifyRequest, reply: FastifyReply, message: string, status?: number): void {
  const query = request.url.indexOf('?');
  const line: AccessLine = {
    reqId: request.id, method: request.method, url: query < 0 ? request.url : request.url.slice(0, query),
    ms: Math.round(reply.elapsedTime * 100) / 100,
  };
  if (status !== undefined) line.status = status;
  request.server.log.info(line, message);
}
