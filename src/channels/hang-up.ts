import type { FastifyReply, FastifyRequest } from 'fastify';
import { logAccess } from '../observability/access-log.ts';

/**
 * Aborts when the client hangs up before its answer is written out, so that a wait on its behalf
 * can end at once; at once if it already has (while the body was read, or auth ran). (Fastify's
 * `request.signal` listens for the request stream's close, which Node emits as soon as a body has
 * been read: it aborted every POST straight away.) Such a request never reaches onResponse, so
 * its access-log line is written here.
 */
export function hangUpSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const hangUp = new AbortController();
  const hungUp = () => {
    hangUp.abort();
    logAccess(request, reply, 'request: the client hung up before its answer');
  };
  if (reply.raw.destroyed || request.raw.socket?.destroyed) hungUp();
  else reply.raw.once('close', () => { if (!reply.raw.writableFinished) hungUp(); });
  return hangUp.signal;
}
