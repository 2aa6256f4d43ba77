import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { Problem } from '../../../domain/problems.ts';
import { bodyNotJson, bodyTooLarge } from '../../json-body.ts';
import { internalError, logFailure, PROBLEM_CONTENT_TYPE, problemBody, sendProblem, storeOutageProblem } from '../../problem-reply.ts';
import { rateLimitHeaderLines } from '../../key-auth.ts';

/** Turns every error into a contract problem; anything unexpected is a logged 500 with no detail. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // The route is judged first: a bad body sent to no route is still a 404, not a 400/413/415.
    const mapped = request.is404 ? noRoute(request) : toProblem(error);
    logFailure(request.log, error, mapped, 'unhandled error');
    return sendProblem(request, reply, mapped);
  });

  app.setNotFoundHandler((request, reply) => sendProblem(request, reply, noRoute(request)));
  // The web app answers GETs no route knows with a page (its catch-all, GET /*). An API URL is
  // more specific, so it lands here: the API's 404, and none of the web app's hooks.
  app.get('/api/*', { schema: { hide: true } }, (_request, reply) => reply.callNotFound());
}

/**
 * Fastify's clientErrorHandler: a request Node's HTTP parser refuses before any route sees it (a
 * malformed request line or Content-Length, headers over Node's 16 KiB, a request that took too
 * long to arrive) still gets the contract's problem body, written straight to the socket, which
 * then closes (what follows on it cannot be trusted to start a request).
 */
export function clientErrorProblem(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // A response to an earlier request on this connection is already on its way (pipelining):
  // nothing may be spliced into it. Node's own handler holds back the same way.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (inFlight?.headersSent) {
    socket.destroy(error);
    return;
  }
  // A request already answered (a 401 before its body was read) whose body then never came in
  // time: its answer is out, and a 408 would be a second answer nobody asked for. Node's parser
  // still holds the request, unfinished, while no response waits on the socket.
  const parsing = (socket as Duplex & { parser?: { incoming?: { complete: boolean } | null } }).parser?.incoming;
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT' && parsing && !parsing.complete && !inFlight) {
    socket.destroy();
    return;
  }
  const problem = error.code === 'HPE_HEADER_OVERFLOW'
    ? new Problem('headers_too_large', 'The request line and headers are larger than this server accepts (16 KiB in all).')
    : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new Problem('request_timeout', 'The request did not arrive in time.')
      : new Problem('malformed_request', 'The request is not valid HTTP/1.1.');
  const requestId = randomUUID();
  // A line of its own, as every answered request has (no route's access log sees this one): the id
  // the client got finds it.
  // (With the answer unsent, the client gone, the line says so.)
  this.log.info({ reqId: requestId, status: problem.status, code: error.code, ...(socket.writable ? {} : { answered: false }) },
    'request refused by the HTTP parser');
  const body = JSON.stringify(problemBody(problem, requestId));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${problem.status} ${problem.title}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}; charset=utf-8\r\n`
      + `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\n${rateLimitHeaderLines(inFlight)}Connection: close\r\n\r\n${body}`);
  }
  socket.destroy(error);
}

const noRoute = (request: FastifyRequest) => new Problem('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);

export function toProblem(error: FastifyError | Error): Problem {
  if (error instanceof Problem) return error;
  const outage = storeOutageProblem(error);
  if (outage) return outage;
  // A route schema's verdict (zod through the type provider, or Fastify's own): dotted field paths.
  const validation = hasZodFastifySchemaValidationErrors(error) ? error.validation : (error as FastifyError).validation;
  if (validation) {
    return Problem.validation(validation.map((issue) => ({
      path: issue.instancePath.replace(/^\//, '').replaceAll('/', '.'),
      message: issue.message ?? 'is invalid',
    })));
  }
  const fastifyError = error as FastifyError;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return bodyTooLarge();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return bodyNotJson();
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Problem('malformed_json', 'The body is not valid JSON.');
  }
  if (error instanceof SyntaxError || fastifyError.statusCode === 400) {
    return new Problem('malformed_json', 'The request could not be parsed.');
  }
  if (fastifyError.statusCode === 413) return bodyTooLarge();
  if (fastifyError.statusCode === 415) return bodyNotJson();
  // The docs' static files (@fastify/static): a path outside their folder, or a conditional or
  // range request that cannot be met. A client's doing, never a 500.
  if (fastifyError.statusCode === 403 || fastifyError.statusCode === 404) return new Problem('not_found', 'There is no such file.');
  if (fastifyError.statusCode === 412) return new Problem('precondition_failed', 'The file does not meet the request\'s precondition (If-Match, If-Unmodified-Since).');
  if (fastifyError.statusCode === 416) return new Problem('range_not_satisfiable', 'The requested range lies outside the file.');
  if (fastifyError.statusCode !== undefined && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return new Problem('malformed_request', 'The request could not be served as sent.');
  }
  return internalError();
}
