/** Problem codes of the contract (§0) and the one error type every layer throws. */
import type { z } from 'zod';
// Installs zod's error map (fields said in the client's terms) for every parser, this module being the one they all import.
import './schema-messages.ts';

export const PROBLEMS = {
  malformed_json: { status: 400, title: 'Malformed JSON' },
  // Refused by the HTTP parser itself, before any route (see clientErrorProblem).
  malformed_request: { status: 400, title: 'Malformed request' },
  request_timeout: { status: 408, title: 'Request timeout' },
  headers_too_large: { status: 431, title: 'Request header fields too large' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  agent_limit_reached: { status: 403, title: 'Agent limit reached' },
  session_not_found: { status: 404, title: 'Session not found' },
  agent_not_found: { status: 404, title: 'Agent not found' },
  workspace_not_found: { status: 404, title: 'Workspace not found' },
  not_found: { status: 404, title: 'Not found' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency key in use' },
  cursor_expired: { status: 410, title: 'Cursor expired' },
  // The docs' static files only (conditional and range requests that cannot be met).
  precondition_failed: { status: 412, title: 'Precondition failed' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  text_empty: { status: 422, title: 'Text is empty' },
  text_too_long: { status: 422, title: 'Text is too long' },
  agent_required: { status: 422, title: 'Agent required' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  validation_failed: { status: 422, title: 'Validation failed' },
  rate_limited: { status: 429, title: 'Too many requests' },
  too_many_streams: { status: 429, title: 'Too many streams' },
  agent_failed: { status: 502, title: 'Agent failed' },
  internal_error: { status: 500, title: 'Internal server error' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
} as const;

export type ProblemCode = keyof typeof PROBLEMS;

export interface FieldError {
  path: string;
  message: string;
}

export class Problem extends Error {
  readonly code: ProblemCode;
  readonly status: number;
  readonly title: string;
  readonly extra: Record<string, unknown>;

  constructor(code: ProblemCode, detail: string, extra: Record<string, unknown> = {}) {
    super(detail);
    this.name = 'Problem';
    this.code = code;
    this.status = PROBLEMS[code].status;
    this.title = PROBLEMS[code].title;
    this.extra = extra;
  }

  static validation(errors: FieldError[]): Problem {
    const detail = errors.map((e) => `${e.path || '(body)'}: ${e.message}`).join('; ');
    return new Problem('validation_failed', detail || 'The request is invalid.', { errors });
  }
}

/** Parses with zod or throws validation_failed; `field` names the value when the schema is not an object. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, field = ''): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw Problem.validation(result.error.issues.map((i) => ({ path: [field, ...i.path].filter((p) => p !== '').join('.'), message: i.message })));
}

export const TEXT_MAX_LENGTH = 32_000;

/** The longest reason: a decision's (contract §5), or an answer's refusal. */
export const REASON_MAX_LENGTH = 2000;

/**
 * Is `text` longer than `max` characters, counting characters as Unicode code points (so an
 * emoji is one)? The one length rule of every text limit. Only counts code points when the
 * UTF-16 length says it could be too long.
 */
export function isLongerThan(text: string, max: number): boolean {
  return text.length > max && [...text].length > max;
}

/** The contract's text rules: text_empty before text_too_long; returns the text as sent. */
export function checkMessageText(text: unknown): string {
  if (typeof text !== 'string' || text.trim() === '') {
    throw new Problem('text_empty', '`text` is required and must be a non-blank string.');
  }
  if (isLongerThan(text, TEXT_MAX_LENGTH)) {
    throw new Problem('text_too_long', `\`text\` is longer than ${TEXT_MAX_LENGTH} characters.`);
  }
  return text;
}

/**
 * The one rule for text that no database here stores as it was sent: U+0000 (PostgreSQL refuses
 * it) and a lone UTF-16 surrogate (not Unicode at all: stored as U+FFFD, so an answer or a
 * summary would come back altered). Refused alike on every database.
 */
export const UNSTORABLE_TEXT_RULE = 'must not contain the NUL character (U+0000) or a lone UTF-16 surrogate';

export function isUnstorableText(value: string): boolean {
  return value.includes('\u0000') || !value.isWellFormed();
}

/** The 422 for unstorable text at `path` (see findUnstorableText). */
export const unstorableTextProblem = (path: string): Problem => Problem.validation([{ path, message: UNSTORABLE_TEXT_RULE }]);

/**
 * Where a parsed JSON body holds unstorable text (see isUnstorableText), in a value or a key, as
 * a dotted path; null when none does. Iterative, so a deeply nested body cannot overflow the stack.
 */
export function findUnstorableText(value: unknown): string | null {
  const stack: Array<{ value: unknown; path: string }> = [{ value, path: '' }];
  while (stack.length > 0) {
    const { value: current, path } = stack.pop()!;
    if (typeof current === 'string') {
      if (isUnstorableText(current)) return path;
    } else if (current !== null && typeof current === 'object') {
      for (const [key, child] of Object.entries(current)) {
        if (isUnstorableText(key)) return path ? `${path}.${key}` : key;
        stack.push({ value: child, path: path ? `${path}.${key}` : key });
      }
    }
  }
  return null;
}
