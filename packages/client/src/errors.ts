import type { AnswerResult, DecisionResult, Problem } from './types.ts';

/** A problem the server answered (RFC 9457): its body, whole, and its stable `code`. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly requestId: string | undefined;
  /** On a 429 or 503: the seconds the server asked to wait (`Retry-After`). */
  readonly retryAfterSeconds: number | undefined;
  /** The problem body as sent (`errors`, `session_id`… included). */
  readonly problem: Problem;

  constructor(problem: Problem, retryAfterSeconds?: number) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.problem = problem;
    this.status = problem.status;
    this.code = problem.code;
    this.detail = problem.detail;
    this.requestId = problem.request_id;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  /** The error for a response that is not a success: its problem body, or one made from its status. */
  static async from(response: Response, body?: unknown): Promise<ApiError> {
    let problem = body;
    if (problem === undefined) problem = await response.json().catch(() => undefined);
    const retryAfter = retryAfterMs(response);
    if (isProblem(problem)) return new ApiError(problem, retryAfter === null ? undefined : retryAfter / 1000);
    return new ApiError({
      type: 'about:blank', title: response.statusText, status: response.status, code: `http_${response.status}`,
      detail: `The server answered ${response.status} without a problem body.`, request_id: response.headers.get('x-request-id') ?? '',
    });
  }
}

function isProblem(value: unknown): value is Problem {
  return typeof value === 'object' && value !== null && typeof (value as Problem).code === 'string' && typeof (value as Problem).status === 'number';
}

/** `Retry-After` in milliseconds (seconds or an HTTP date), or null when absent or unreadable. */
export function retryAfterMs(response: Response): number | null {
  const header = response.headers.get('retry-after');
  if (header === null) return null;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

/** Strict bulk mode: some entries of a bulk call failed (the others were applied). */
export class BulkError<R extends DecisionResult | AnswerResult> extends Error {
  override readonly name = 'BulkError';
  /** Every entry's result, in the order sent. */
  readonly results: R[];
  /** The entries that failed: `ok: false`, or an answer that was not accepted. */
  readonly failed: R[];

  constructor(results: R[], failed: R[]) {
    super(`${failed.length} of ${results.length} entries failed: ${failed.map(describeFailure).join('; ')}`);
    this.results = results;
    this.failed = failed;
  }
}

function describeFailure(result: DecisionResult | AnswerResult): string {
  const id = 'operation_id' in result ? result.operation_id : result.request_id;
  if (!result.ok) return `${id}: ${result.error.code} (${result.error.message})`;
  return `${id}: not accepted (${'reason' in result ? result.reason ?? '' : ''})`;
}

/** `sendAndWait` gave up at its `timeoutMs`; the turn goes on, and its session can be read later. */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
  readonly sessionId: string | undefined;

  constructor(timeoutMs: number, sessionId: string | undefined) {
    super(`no reply within ${timeoutMs} ms${sessionId ? ` (session ${sessionId} goes on)` : ''}`);
    this.sessionId = sessionId;
  }
}
