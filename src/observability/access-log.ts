import type { FastifyReply, FastifyRequest } from 'fastify';

/** What every access-log line says of its request (the query string left out: it may be long). */
export function accessLogFields(request: FastifyRequest, reply: FastifyReply): { method: string; url: string | undefined; ms: number } {
  return { method: request.method, url: request.url.split('?')[0], ms: Math.round(reply.elapsedTime * 100) / 100 };
}
