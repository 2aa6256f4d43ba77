import { API } from './harness.ts';

/**
 * A Server-Sent Events client for the tests of the event streams (the API's `GET /events`, the
 * web's `/events/stream`) over real HTTP: fetch and a
 * line parser of its own (the text/event-stream format, WHATWG HTML §9.2.6), so that what is
 * checked is the bytes the server wrote, not what a library made of them.
 */

/** One dispatched event: its `id:`, `event:` and `data:` lines, the data parsed as JSON. */
export interface StreamedEvent {
  id: string | undefined;
  event: string | undefined;
  data: string;
  json: any;
}

/** How a stream ended: `clean` when the response ended normally, else the error that cut it. */
export interface StreamEnd {
  clean: boolean;
  error?: unknown;
}

export interface EventStream {
  /** The response's status and headers (200 text/event-stream here). */
  response: Response;
  /** Every event received so far, in order. */
  readonly events: StreamedEvent[];
  /** Every comment line received so far (its text after the colon). */
  readonly comments: string[];
  /** Resolves once `count` events in all have arrived; rejects when the stream ends first or `timeoutMs` passes. */
  untilEvents(count: number, timeoutMs?: number): Promise<StreamedEvent[]>;
  /** Resolves once a comment line has arrived; rejects as untilEvents does. */
  untilComment(timeoutMs?: number): Promise<string>;
  /** Resolves when the response ends: cleanly, or cut (by the server, the network, or close()). */
  ended: Promise<StreamEnd>;
  /** Hangs up. */
  close(): void;
}

/** What the server answered instead of a stream (a problem, say). */
export interface Refused {
  response: Response;
  body: any;
}

/**
 * `GET {baseUrl}/api/v1/api-channel/events{query}` with `Accept: text/event-stream` and this key,
 * `Last-Event-ID` when given: the open stream, or the answer when it is not a stream.
 */
export async function openEventStream(
  baseUrl: string, key: string, options: { lastEventId?: string; query?: string } = {},
): Promise<EventStream | Refused> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  return openStream(`${baseUrl}${API}/events${options.query ?? ''}`, headers);
}

/** `GET url` with `Accept: text/event-stream` and these headers (a key, a cookie): the open stream, or the answer when it is not a stream. */
export async function openStream(url: string, headers: Record<string, string>): Promise<EventStream | Refused> {
  const hangUp = new AbortController();
  const response = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' }, signal: hangUp.signal });
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    // A problem (JSON), or a page of the web's (HTML) as its refusals are.
    return { response, body: /json/.test(response.headers.get('content-type') ?? '') ? await response.json() : await response.text() };
  }
  const events: StreamedEvent[] = [];
  const comments: string[] = [];
  let end: StreamEnd | null = null;
  const waiters = new Set<() => void>();
  const changed = () => { for (const waiter of waiters) waiter(); };
  const ended = read(response.body!, (event) => events.push(event), (comment) => comments.push(comment), changed)
    .then((): StreamEnd => ({ clean: true }), (error: unknown): StreamEnd => ({ clean: false, error }))
    .then((how) => {
      end = how;
      changed();
      return how;
    });

  /** Resolves with `value()` once it is not undefined; rejects at the end of the stream or after `timeoutMs`. */
  function until<T>(value: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const settle = (outcome: () => void) => {
        clearTimeout(timer);
        waiters.delete(look);
        outcome();
      };
      const timer = setTimeout(() => settle(() => reject(new Error(`${what}: not within ${timeoutMs} ms (events: ${events.map((e) => e.id).join(',')})`))), timeoutMs);
      const look = () => {
        const found = value();
        if (found !== undefined) settle(() => resolve(found));
        else if (end) settle(() => reject(new Error(`${what}: the stream ended first (${end!.clean ? 'cleanly' : String(end!.error)})`)));
      };
      waiters.add(look);
      look();
    });
  }

  return {
    response, events, comments, ended,
    untilEvents: (count, timeoutMs = 15_000) => until(() => (events.length >= count ? events.slice() : undefined), `${count} events`, timeoutMs),
    untilComment: (timeoutMs = 15_000) => until(() => comments[0], 'a comment line', timeoutMs),
    close: () => hangUp.abort(),
  };
}

export const isStream = (opened: EventStream | Refused): opened is EventStream => 'events' in opened;

/** Reads the body to its end, handing on each event and comment as its blank line (or line) arrives. */
async function read(body: ReadableStream<Uint8Array>, onEvent: (event: StreamedEvent) => void, onComment: (text: string) => void, onChange: () => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffered = '';
  let fields: { id?: string; event?: string; data: string[] } = { data: [] };
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    for (;;) {
      const lineEnd = buffered.search(/\r\n|\r|\n/);
      if (lineEnd < 0) break;
      const line = buffered.slice(0, lineEnd);
      buffered = buffered.slice(lineEnd + (buffered.startsWith('\r\n', lineEnd) ? 2 : 1));
      if (line === '') {
        if (fields.data.length > 0) {
          const data = fields.data.join('\n');
          onEvent({ id: fields.id, event: fields.event, data, json: JSON.parse(data) });
        }
        fields = { data: [] };
      } else if (line.startsWith(':')) {
        onComment(line.slice(1).trim());
      } else {
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (name === 'data') fields.data.push(value);
        else if (name === 'id' || name === 'event') fields[name] = value;
      }
      onChange();
    }
  }
}
