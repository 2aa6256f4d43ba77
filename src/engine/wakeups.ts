import type { Bus } from './bus.ts';

/** What a held request waits on: a session's next turn (§9.1), or a person's next feed event (§9.3). */
export type WakeupTopic = `session:${string}` | `feed:${string}`;

/** How a read is held: how long at most, and the signal that ends it early (the client left, a shutdown). */
export interface Hold {
  waitMs: number;
  signal?: AbortSignal | undefined;
}

/** The topic woken by every person's feed events (`feed:<user id>` is one person's). */
export const EVERYONE = 'feed:*';

/** A request's place in line for one topic, from listen() until stop(). */
export interface WakeupListener {
  /**
   * Resolves true at the topic's next change (or at once if one came since the last call, or
   * since listen()), false when `timeoutMs` runs out or `signal` aborts.
   */
  next(timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  stop(): void;
}

/**
 * Requests held until something changes, woken by the bus (this instance's commits and, on
 * PostgreSQL, every other's). A held request costs a closure here and no database connection.
 */
export class Wakeups {
  private readonly listeners = new Map<WakeupTopic, Set<() => void>>();

  constructor(bus: Bus) {
    bus.on((event) => {
      if (event.type === 'session_turn') this.wake(`session:${event.sessionId}`);
      else if (event.type === 'feed') {
        for (const userId of event.userIds) this.wake(`feed:${userId}`);
        this.wake(EVERYONE);
      }
    });
  }

  /** Listens from now on: call it before reading, so that a change between the read and the wait is not missed. */
  listen(topic: WakeupTopic): WakeupListener {
    let changed = false;
    let resolveWait: ((changed: boolean) => void) | null = null;
    const onChange = () => {
      changed = true;
      resolveWait?.(true);
    };
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(onChange);
    const listeners = set;
    return {
      next: (timeoutMs, signal) => {
        if (changed) {
          changed = false;
          return Promise.resolve(true);
        }
        if (timeoutMs <= 0 || signal?.aborted) return Promise.resolve(false);
        return new Promise<boolean>((resolve) => {
          const settle = (value: boolean) => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', onAbort);
            resolveWait = null;
            changed = false;
            resolve(value);
          };
          const onAbort = () => settle(false);
          const timer = setTimeout(() => settle(false), timeoutMs);
          signal?.addEventListener('abort', onAbort, { once: true });
          resolveWait = settle;
        });
      },
      stop: () => {
        resolveWait?.(false);
        listeners.delete(onChange);
        if (listeners.size === 0 && this.listeners.get(topic) === listeners) this.listeners.delete(topic);
      },
    };
  }

  /** Requests held now, for the metrics. */
  get held(): number {
    let count = 0;
    for (const set of this.listeners.values()) count += set.size;
    return count;
  }

  private wake(topic: WakeupTopic): void {
    const set = this.listeners.get(topic);
    if (set) for (const onChange of set) onChange();
  }
}
