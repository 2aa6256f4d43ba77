import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import sseModule, { type SSEPluginOptions } from '@fastify/sse';
import { Problem } from '../domain/problems.ts';

/** The most event streams one holder (an API key, a signed-in person) holds open on one instance (§9.3). */
export const MAX_STREAMS_PER_HOLDER = 10;

/** A comment line this often keeps a quiet stream (and the proxies on its way) open (§9.3: at most every 15 s). */
const HEARTBEAT_INTERVAL_MS = 10_000;

/**
 * The Server-Sent Events plugin (@fastify/sse). Its CommonJS export is the plugin itself (wrapped
 * so that its route hook sees the routes of the scope it is registered in); its type declarations
 * describe an ES module whose default is that plugin.
 */
const fastifySse = sseModule as unknown as FastifyPluginAsync<SSEPluginOptions>;

/**
 * The event streams open on this instance, by holder: a holder's eleventh is refused, and a
 * shutdown ends them all (their clients reconnect, to this instance once it is back or to another).
 */
export class EventStreams {
  private readonly openByHolder = new Map<string, number>();
  private readonly closing = new AbortController();
  private readonly refusal: string;

  /** `refusal`: the too_many_streams problem's detail, in the channel's words. */
  constructor(refusal: string) {
    this.refusal = refusal;
  }

  /** Ends every stream, and every read held on the feed (the server is closing). */
  readonly shutdownSignal: AbortSignal = this.closing.signal;

  /** Takes one of the holder's stream slots; the returned function gives it back. */
  open(holder: string): () => void {
    const open = this.openByHolder.get(holder) ?? 0;
    if (open >= MAX_STREAMS_PER_HOLDER) throw new Problem('too_many_streams', this.refusal);
    this.openByHolder.set(holder, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.openByHolder.get(holder) ?? 1) - 1;
      if (left === 0) this.openByHolder.delete(holder);
      else this.openByHolder.set(holder, left);
    };
  }

  shutDown(): void {
    this.closing.abort();
  }
}

/**
 * A channel's event streams: the SSE plugin in its scope, and the streams it holds open, which
 * end as the server starts closing (their clients reconnect elsewhere or after the restart).
 * `refusal`: the too_many_streams problem's detail, in the channel's words.
 */
export async function installEventStreams(scope: FastifyInstance, refusal: string): Promise<EventStreams> {
  await scope.register(fastifySse, { heartbeatInterval: HEARTBEAT_INTERVAL_MS });
  const streams = new EventStreams(refusal);
  scope.addHook('preClose', (done) => { streams.shutDown(); done(); });
  return streams;
}
