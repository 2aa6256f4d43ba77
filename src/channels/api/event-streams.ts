import { Problem } from '../../domain/problems.ts';

/** The most event streams one key holds open at once (§9.3). */
export const MAX_STREAMS_PER_KEY = 10;

/**
 * The event streams open on this instance, by key: a key's eleventh is refused, and a
 * shutdown ends them all (their clients reconnect, to this instance once it is back or to another).
 */
export class EventStreams {
  private readonly openByKey = new Map<string, number>();
  private readonly closing = new AbortController();

  /** Ends every stream, and every read held on the feed (the server is closing). */
  readonly shutdownSignal: AbortSignal = this.closing.signal;

  /** Takes one of the key's stream slots; the returned function gives it back. */
  open(keyId: string): () => void {
    const open = this.openByKey.get(keyId) ?? 0;
    if (open >= MAX_STREAMS_PER_KEY) {
      throw new Problem('too_many_streams', `This key already holds ${MAX_STREAMS_PER_KEY} open event streams: close one, or share one stream between readers.`);
    }
    this.openByKey.set(keyId, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.openByKey.get(keyId) ?? 1) - 1;
      if (left === 0) this.openByKey.delete(keyId);
      else this.openByKey.set(keyId, left);
    };
  }

  shutDown(): void {
    this.closing.abort();
  }
}
