import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { Problem } from '../domain/problems.ts';
import { isStoreUnavailable, storeOutageFields } from '../store/unavailable.ts';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The shape of problemBody, as the API's OpenAPI document and the MCP tools' output schemas show it. */
export const ProblemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  code: z.string().meta({ description: 'Stable machine-readable code (see the contract\'s table).' }),
  detail: z.string(),
  request_id: z.string(),
  errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  session_id: z.string().optional().meta({ description: 'On 502 agent_failed: the session of the message.' }),
  message_ts: z.string().optional().meta({ description: 'On 502 agent_failed: ts of the message in the transcript.' }),
}).meta({ id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' });

/** RFC 9457 body of a Problem; never a stack, SQL or another account's data. */
export function problemBody(problem: Problem, requestId: string) {
  return {
    type: `urn:agent-channel:problem:${problem.code}`,
    title: problem.title,
    status: problem.status,
    code: problem.code,
    detail: problem.message,
    request_id: requestId,
    ...problem.extra,
  };
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem): FastifyReply {
  if (problem.code === 'unauthorized') reply.header('WWW-Authenticate', 'Bearer');
  // Both pass within a moment: the first request with this key is being accepted right now; the
  // database or the rate limit store is away, or this instance is shutting down (another answers).
  if (problem.code === 'idempotency_key_in_use' || problem.code === 'service_unavailable') reply.header('Retry-After', '1');
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problemBody(problem, request.id));
}

/**
 * A database outage (see isStoreUnavailable) as the API's routes and the MCP tools answer it:
 * 503, not the client's doing nor a fault in our code, and the same request a moment later may
 * well succeed; null for any other error.
 */
export function storeOutageProblem(error: unknown): Problem | null {
  return isStoreUnavailable(error) ? new Problem('service_unavailable', 'The database cannot be reached just now; send the request again in a moment.') : null;
}

/** What an error no rule maps becomes, on the API and in MCP alike: a 500 that names no cause. */
export const internalError = (): Problem =>
  new Problem('internal_error', 'Something went wrong on our side. The request id identifies it in our logs.');

/**
 * The log line of a failure once it is mapped to `problem`: a 500 of ours with its error, a
 * database outage briefly (the same line for every request while it lasts), the client's doing
 * not at all (the access log has it).
 */
export function logFailure(log: FastifyBaseLogger, error: unknown, problem: Problem, message: string): void {
  if (problem.code === 'internal_error') log.error({ err: error }, message);
  else if (isStoreUnavailable(error)) log.warn(storeOutageFields(error), 'database unavailable');
}

/** The one 401 every cause shares (missing, malformed, unknown, revoked, expired, inactive). */
export const UNAUTHORIZED = (): Problem =>
  new Problem('unauthorized', 'A valid API key is required: Authorization: Bearer ak_<keyId>_<secret>.');

