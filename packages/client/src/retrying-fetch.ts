import { retryAfterMs } from './errors.ts';

/** How the client retries. Every wait is cut short by the request's AbortSignal. */
export interface RetryOptions {
  /** Retries after the first attempt (default 4). */
  attempts?: number;
  /** The longest wait the client will sit out; a longer `Retry-After` is answered with the error at once (default 60 000 ms). */
  maxWaitMs?: number;
  /** The first back-off after a connection error, doubled each time up to 8 s (default 250 ms). */
  backoffMs?: number;
}

export type FetchFunction = (request: Request) => Promise<Response>;

/**
 * fetch, retried where retrying is safe:
 * - 429 and 503 after `Retry-After` (the server did nothing with the request);
 * - 409 `idempotency_key_in_use` after a short pause (the first request is still being accepted);
 * - a connection error with back-off, for a request that changes nothing twice: a GET, or one
 *   carrying an `Idempotency-Key` (every send does), or one refused before it was sent.
 */
export function retryingFetch(fetchImpl: typeof fetch, options: RetryOptions = {}): FetchFunction {
  const attempts = options.attempts ?? 4;
  const maxWaitMs = options.maxWaitMs ?? 60_000;
  const backoffMs = options.backoffMs ?? 250;
  const backoff = (attempt: number) => Math.min(8000, backoffMs * 2 ** attempt) * (0.75 + Math.random() / 2);
  return async (request) => {
    const repeatable = request.method === 'GET' || request.method === 'HEAD' || request.headers.has('idempotency-key');
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await fetchImpl(request.clone());
      } catch (error) {
        if (request.signal.aborted || attempt >= attempts || !(repeatable || wasRefused(error))) throw error;
        await sleep(backoff(attempt), request.signal);
        continue;
      }
      const wait = await retryWait(response, backoff(attempt));
      if (wait === null || attempt >= attempts || wait > maxWaitMs) return response;
      await response.body?.cancel();
      await sleep(wait, request.signal);
    }
  };
}

/** How long to wait before trying again, or null when this answer is final. */
async function retryWait(response: Response, backoff: number): Promise<number | null> {
  if (response.status === 429 || response.status === 503) return retryAfterMs(response) ?? backoff;
  if (response.status === 409) {
    const body = await response.clone().json().catch(() => null) as { code?: unknown } | null;
    if (body?.code === 'idempotency_key_in_use') return retryAfterMs(response) ?? backoff;
  }
  return null;
}

/** A connection refused never reached the server: safe to send again whatever the request. */
function wasRefused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause;
  return cause?.code === 'ECONNREFUSED';
}

/** Resolves after `ms`, or rejects with the signal's reason when it is aborted first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
