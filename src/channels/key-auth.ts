import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Problem } from '../domain/problems.ts';
import type { AuthenticatedKey, KeysService } from '../services/keys.ts';
import type { RateDecision, RateLimiter } from '../ratelimit/rate-limiter.ts';
import { sendProblem, UNAUTHORIZED } from './problem-reply.ts';
import { sentMoreThanOnce } from './repeated-header.ts';
import { isStoreUnavailable, storeOutageFields } from '../store/unavailable.ts';
import type { GetBodyJudge } from './json-body.ts';

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: AuthenticatedKey | null;
  }
}

export interface KeyAuthDeps {
  keys: KeysService;
  rateLimiter: RateLimiter;
  /** Judges a GET's body, which Fastify does not read (the API's routes); a channel with no GET body to judge leaves it out. */
  judgeGetBody?: GetBodyJudge;
}

/**
 * Bearer auth, then the key's rate limit, before the body is read: the contract's order is
 * route → 401 → 429 → body → objects. A 401 never touches a quota. A GET's body, which Fastify
 * does not read, is judged here once the request is admitted (`judgeGetBody`). Every channel
 * that takes API keys (the API, MCP) installs this one check in its scope.
 */
export function installKeyAuth(app: FastifyInstance, deps: KeyAuthDeps): void {
  app.decorateRequest('apiKey', null);
  app.addHook('onRequest', async (request, reply) => {
    // Two keys in one request (RFC 9110 allows one Authorization line) name no key: the same 401.
    const authorization = sentMoreThanOnce(request.raw.rawHeaders, 'authorization') ? undefined : request.headers.authorization;
    const key = await deps.keys.authenticate(authorization);
    if (!key) return sendProblem(request, reply, UNAUTHORIZED());
    request.apiKey = key;
    let verdict;
    try {
      verdict = await deps.rateLimiter.take(key.keyId, key.rateLimit);
    } catch (error) {
      return limitUncheckable(error, request, reply);
    }
    reply.header('RateLimit-Policy', policyOf(verdict));
    reply.header('RateLimit', remainingOf(verdict));
    (reply.raw as VerdictHolder)[verdictOf] = verdict;
    if (!verdict.allowed) {
      reply.header('Retry-After', String(verdict.resetSeconds));
      return sendProblem(request, reply, new Problem('rate_limited',
        `This key allows ${verdict.limit} requests per minute; retry in ${verdict.resetSeconds} s.`));
    }
    await deps.judgeGetBody?.(request);
  });
}

/**
 * No count, no request (never more than L a minute). The store away (Redis, or the database) is
 * one brief warn line, as a database outage is; anything else is a fault of ours, logged with
 * its stack.
 */
function limitUncheckable(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (isStoreUnavailable(error)) request.log.warn(storeOutageFields(error), 'rate limit store unavailable');
  else request.log.error({ err: error }, 'rate limit check failed');
  return sendProblem(request, reply, new Problem('service_unavailable', 'The key\'s rate limit cannot be checked just now; retry in a moment.'));
}

const policyOf = (verdict: RateDecision): string => `"key";q=${verdict.limit};w=60`;
const remainingOf = (verdict: RateDecision): string => `"key";r=${verdict.remaining};t=${verdict.resetSeconds}`;

/**
 * The rate limit verdict of each response's request, for an answer written past Fastify (a 408
 * when the body never finishes arriving): an authenticated request was counted, and every
 * authenticated response says so (contract §0). Kept on the response itself, which lives as
 * long as the request.
 */
const verdictOf = Symbol('rate limit verdict');
type VerdictHolder = { [verdictOf]?: RateDecision };

/** The rate limit header lines for a raw response whose request was authenticated ('' if none was). */
export function rateLimitHeaderLines(response: object | undefined): string {
  const verdict = (response as VerdictHolder | undefined)?.[verdictOf];
  return verdict ? `RateLimit-Policy: ${policyOf(verdict)}\r\nRateLimit: ${remainingOf(verdict)}\r\n` : '';
}

/** The authenticated key of a request that passed installKeyAuth. */
export function callerOf(request: FastifyRequest): AuthenticatedKey {
  if (!request.apiKey) throw UNAUTHORIZED();
  return request.apiKey;
}
