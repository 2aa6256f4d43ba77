import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { Problem } from '../../../domain/problems.ts';
import { sendProblem } from '../problem-reply.ts';

/** Turns every error into a contract problem; anything unexpected is a logged 500 with no detail. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // The route is judged first: a bad body sent to no route is still a 404, not a 400/413/415.
    const mapped = request.is404 ? noRoute(request) : toProblem(error);
    if (mapped.status >= 500 && mapped.code === 'internal_error') {
      request.log.error({ err: error }, 'unhandled error');
    }
    return sendProblem(request, reply, mapped);
  });

  app.setNotFoundHandler((request, reply) => sendProblem(request, reply, noRoute(request)));
}

const noRoute = (request: FastifyRequest) => new Problem('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`);

export function toProblem(error: FastifyError | Error): Problem {
  if (error instanceof Problem) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    return Problem.validation(error.validation.map((issue) => ({
      path: issue.instancePath.replace(/^\//, '').replaceAll('/', '.'),
      message: issue.message ?? 'is invalid',
    })));
  }
  const fastifyError = error as FastifyError;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem('payload_too_large', 'The body is larger than 1 MiB.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Problem('unsupported_media_type', 'Send the body as application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Problem('malformed_json', 'The body is not valid JSON.');
  }
  if (fastifyError.validation) {
    return Problem.validation(fastifyError.validation.map((v) => ({
      path: v.instancePath.replace(/^\//, '').replaceAll('/', '.'), message: v.message ?? 'is invalid',
    })));
  }
  if (error instanceof SyntaxError || fastifyError.statusCode === 400) {
    return new Problem('malformed_json', 'The request could not be parsed.');
  }
  if (fastifyError.statusCode === 413) return new Problem('payload_too_large', 'The body is larger than 1 MiB.');
  if (fastifyError.statusCode === 415) return new Problem('unsupported_media_type', 'Send the body as application/json.');
  return new Problem('internal_error', 'Something went wrong on our side. The request id identifies it in our logs.');
}
