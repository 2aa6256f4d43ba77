import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { isPromise, type MaybePromise } from '../../../domain/maybe-promise.ts';
import { Problem } from '../../../domain/problems.ts';
import type { AuthenticatedKey, KeysService } from '../../../services/keys.ts';
import type { RateDecision, RateLimiter } from '../../../ratelimit/rate-limiter.ts';
import { sendProblem, UNAUTHORIZED } from '../problem-reply.ts';
import { sentMoreThanOnce } from '../repeated-header.ts';
import { isStoreUnavailable, storeOutageFields } from '../../../store/unavailable.ts';
import type { GetBodyJudge } from '../../json-body.ts';

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: AuthenticatedKey | null;
  }
}

export interface KeyAuthDeps { keys: KeysService; rateLimiter: RateLimiter; judgeGetBody: GetBodyJudge }

/**
 * Bearer auth, then the key's rate limit, before the body is read: the contract's order is
 * route → 401 → 429 → body → objects. A 401 never touches a quota. A GET's body, which Fastify
 * does not read, is judged here once the request is admitted (`judgeGetBody`).
 *
 * A callback hook, not an async one: with the key in memory and the in-process limiter, a request
 * passes with no promise at all (see MaybePromise); the database or a shared limiter makes it wait.
 */
export function installKeyAuth(app: FastifyInstance, deps: KeyAuthDeps): void {
  app.decorateRequest('apiKey', null);
  app.addHook('onRequest', (request, reply, done) => {
    // Two keys in one request (RFC 9110 allows one Authorization line) name no key: the same 401.
    const authorization = sentMoreThanOnce(request.raw.rawHeaders, 'authorization') ? undefined : request.headers.authorization;
    const key = deps.keys.authenticate(authorization);
    if (isPromise(key)) key.then((found) => takeFromLimit(found, request, reply, deps, done), (error: unknown) => done(failure(error)));
    else takeFromLimit(key, request, reply, deps, done);
  });
}

function takeFromLimit(key: AuthenticatedKey | null, request: FastifyRequest, reply: FastifyReply, deps: KeyAuthDeps, done: HookHandlerDoneFunction): void {
  if (!key) {
    sendProblem(request, reply, UNAUTHORIZED());
    return;
  }
  request.apiKey = key;
  let verdict: MaybePromise<RateDecision>;
  try {
    verdict = deps.rateLimiter.take(key.keyId, key.rateLimit);
  } catch (error) {
    limitUncheckable(error, request, reply);
    return;
  }
  if (isPromise(verdict)) verdict.then((taken) => applyVerdict(taken, request, reply, deps, done), (error) => limitUncheckable(error, request, reply));
  else applyVerdict(verdict, request, reply, deps, done);
}

/**
 * No count, no request (never more than L a minute). The store away (Redis, or the database) is
 * one brief warn line, as a database outage is; anything else is a fault of ours, logged with
 * its stack.
 */
function limitUncheckable(error: unknown, request: FastifyRequest, reply: FastifyReply): void {
  if (isStoreUnavailable(error)) request.log.warn(storeOutageFields(error), 'rate limit store unavailable');
  else request.log.error({ err: error }, 'rate limit check failed');
  sendProblem(request, reply, new Problem('service_unavailable', 'The key\'s rate limit cannot be checked just now; retry in a moment.'));
}

/** The verdict's headers, then a 429, or the request on its way (its GET body judged first). */
function applyVerdict(verdict: RateDecision, request: FastifyRequest, reply: FastifyReply, deps: KeyAuthDeps, done: HookHandlerDoneFunction): void {
  reply.header('RateLimit-Policy', policyOf(verdict));
  reply.header('RateLimit', remainingOf(verdict));
  (reply.raw as VerdictHolder)[verdictOf] = verdict;
  if (!verdict.allowed) {
    reply.header('Retry-After', String(verdict.resetSeconds));
    sendProblem(request, reply, new Problem('rate_limited',
      `This key allows ${verdict.limit} requests per minute; retry in ${verdict.resetSeconds} s.`));
    return;
  }
  const judging = deps.judgeGetBody(request);
  if (judging) judging.then(() => done(), (error: unknown) => done(failure(error)));
  else done();
}

/** What a rejection is passed on as: Fastify takes a falsy error for success, an async hook's rejection never did. */
const failure = (error: unknown): Error => (error instanceof Error ? error : new Error(`a check of the request failed: ${String(error)}`));

const policyOf = (verdict: RateDecision): string => `"key";q=${verdict.limit};w=60`;
const remainingOf = (verdict: RateDecision): string => `"key";r=${verdict.remaining};t=${verdict.resetSeconds}`;

/**
 * The rate limit verdict of each response's request, for an answer written past Fastify (a 408
 * when the body never finishes arriving): an authenticated request was counted, and every
 * authenticated response says so (contract §0). Kept on the response itself: a WeakMap entry per
 * request cost the garbage collector more than the rest of the limit's bookkeeping.
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
