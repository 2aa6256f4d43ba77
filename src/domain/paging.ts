import { Problem } from './problems.ts';

/** The bounds of every paged read's `limit` (transcripts, actions, questions, the web's lists). */
export const PAGE_LIMIT = { min: 1, max: 200, default: 50 } as const;

/** A page size as every paged read takes it: 1 to 200, 50 when not given. */
export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return PAGE_LIMIT.default;
  if (!Number.isInteger(limit) || limit < PAGE_LIMIT.min || limit > PAGE_LIMIT.max) {
    throw Problem.validation([{ path: 'limit', message: `must be an integer from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max}` }]);
  }
  return limit;
}
