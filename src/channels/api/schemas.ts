import { z } from 'zod';
import { PAGE_LIMIT } from '../../domain/paging.ts';
import { ProblemSchema } from '../problem-reply.ts';

/** Shared OpenAPI pieces of the API channel. */

/** A problem response in the OpenAPI document: the Problem schema under application/problem+json. */
export const problemResponse = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});

/**
 * The problem responses every authenticated route can give. (A 422 is each route's own: only a
 * route that reads a body, a query parameter or a path id can give one.)
 */
export const COMMON_PROBLEMS = {
  401: problemResponse('Missing, malformed, unknown, revoked, expired or inactive key, or two `Authorization` headers.'),
  429: problemResponse('The key\'s per-minute limit is used up; see Retry-After.'),
  408: problemResponse('request_timeout: the request (its body included) did not arrive within the server\'s `REQUEST_TIMEOUT_MS`; the connection closes. When the headers came in time, the key was checked and the request counted, and the rate limit headers say so.'),
  431: problemResponse('headers_too_large: the request line and headers are over 16 KiB; the connection closes.'),
  500: problemResponse('internal_error: a fault on our side. The body names no cause; its request_id finds the fault in the server\'s log.'),
  503: problemResponse('service_unavailable: the server is shutting down, or the database or the rate limit store cannot be reached; send the request again after Retry-After (1 s).'),
} as const;

export const BODY_PROBLEMS = {
  400: problemResponse('The body is not valid JSON (or not UTF-8).'),
  413: problemResponse('The body is larger than 1 MiB.'),
  415: problemResponse('The body is not application/json, or it is compressed (Content-Encoding).'),
  422: problemResponse('A field is missing or invalid.'),
} as const;

/** A GET needs no body; one sent all the same is judged as any body is (contract §0), then ignored. */
export const UNWANTED_BODY_PROBLEMS = {
  400: problemResponse('A body was sent (none is needed) and it is not valid JSON.'),
  413: problemResponse('A body was sent (none is needed) and it is larger than 1 MiB.'),
  415: problemResponse('A body was sent (none is needed) and it is not application/json, or it is compressed.'),
} as const;

/**
 * A paged list's `limit`, as a query string carries it: digits only (no "1e2" or " 5"), its range
 * judged by the service (pageLimit); documented as the integer it means. `whenOmitted`: what a
 * request without it gets, where that is not a page of the default size.
 */
export const pageLimitParam = (items: string, whenOmitted?: string) => z.string().regex(/^\d{1,4}$/, `must be an integer from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max}`).optional()
  .meta({
    description: `${items} per page, ${PAGE_LIMIT.min}–${PAGE_LIMIT.max} (${whenOmitted ?? `default ${PAGE_LIMIT.default}`}).`,
    example: PAGE_LIMIT.default, ...(whenOmitted ? {} : { default: PAGE_LIMIT.default }),
    type: 'integer', minimum: PAGE_LIMIT.min, maximum: PAGE_LIMIT.max, pattern: undefined,
  } as Record<string, unknown>);

/**
 * The query of a list of what waits for a person (GET /actions, GET /questions): one session's
 * items, and a page of them when the client pages (`limit`, `after`); without either, all of them.
 */
export function waitingListQuery(items: { plural: string; singular: string; id: string; settled: string; exampleId: string }) {
  return z.object({
    // No length bound of its own (the URL's bounds it): an id that cannot be one matches nothing.
    session_id: z.string().optional().meta({ description: `Only ${items.plural} of this session (an unknown one: an empty list).` }),
    limit: pageLimitParam(items.plural[0]!.toUpperCase() + items.plural.slice(1),
      `without \`limit\` and \`after\`, every ${items.singular} is listed, in one answer; with \`after\` alone, ${PAGE_LIMIT.default}`),
    after: z.string().optional().meta({
      description: `The \`${items.id}\` of the last ${items.singular} of the page before: only ${items.plural} after it are listed (${items.settled} since or not).`,
      example: items.exampleId,
    }),
  });
}

/** A `limit` query parameter as the service takes it (undefined when not given). */
export const pageLimitOf = (limit: string | undefined): number | undefined => (limit === undefined ? undefined : Number(limit));
