import { ApiError } from './errors.ts';
import { sleep, type FetchFunction } from './retrying-fetch.ts';
import { parseSse } from './sse.ts';
import type { FeedEvent } from './types.ts';

export interface EventsOptions {
  /** Start after this event id; without it, with the next new event. */
  after?: string;
  /** Only this session's events. */
  sessionId?: string;
  /** Ends the stream (the loop then ends with the signal's reason). */
  signal?: AbortSignal;
  /** Called at each reconnection, with what cut the stream (undefined: it ended). */
  onReconnect?: (cause: unknown) => void;
}

/** The longest pause between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 15_000;

/**
 * Reads `GET /events` as SSE and reconnects whenever the stream ends or is cut, sending the
 * last id seen as `Last-Event-ID`: the server resumes after it, so nothing is lost or repeated.
 * A problem answer (401, 404, 410, 422…) ends the loop with an ApiError; 429 and 503 are waited
 * out by the fetch underneath, and any other 5xx is reconnected after a pause.
 */
export async function* followEvents(
  connection: { fetch: FetchFunction; url: string; apiKey: string }, options: EventsOptions,
): AsyncGenerator<FeedEvent> {
  const hangUp = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, hangUp.signal]) : hangUp.signal;
  const url = new URL(connection.url);
  if (options.sessionId) url.searchParams.set('session_id', options.sessionId);
  let lastId = options.after;
  let reconnectDelay = 500; // the server's `retry:`, else half a second
  let delay = reconnectDelay;
  try {
    for (;;) {
      const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${connection.apiKey}` };
      if (lastId !== undefined) headers['last-event-id'] = lastId;
      let cause: unknown;
      try {
        const response = await connection.fetch(new Request(url, { headers, signal }));
        if (!response.ok) throw await ApiError.from(response);
        if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
          throw new Error(`GET /events answered ${response.headers.get('content-type')}, not an event stream`);
        }
        for await (const message of parseSse(response.body!)) {
          if (message.retry !== undefined) reconnectDelay = message.retry;
          if (message.id !== undefined) lastId = message.id;
          delay = reconnectDelay; // a stream that delivered starts its back-off afresh
          yield JSON.parse(message.data) as FeedEvent;
        }
      } catch (error) {
        // A problem is the server's answer; a 5xx the fetch does not wait out (a proxy's 502 while
        // the server restarts) is passing, as a cut connection is.
        if (signal.aborted || (error instanceof ApiError && error.status < 500)) throw error;
        cause = error;
      }
      options.onReconnect?.(cause);
      await sleep(delay * (0.75 + Math.random() / 2), signal);
      delay = Math.min(MAX_RECONNECT_DELAY_MS, delay * 2);
    }
  } finally {
    hangUp.abort();
  }
}
