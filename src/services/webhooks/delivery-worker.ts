import { retryPauseMs, type DeliveryObserver, type DeliveryOutcome } from '../../domain/webhooks.ts';
import type { Bus } from '../../engine/bus.ts';
import { claimDueDeliveries, finishAttempt, releaseAllLeases, releaseLease, type ClaimedDelivery } from '../../store/repos/webhooks.ts';
import type { Store } from '../../store/store.ts';
import type { SecretBox } from './secret-box.ts';
import { DELIVERY_TIMEOUT_MS, WebhookSender, type SendResult } from './sender.ts';


export interface DeliveryWorkerOptions {
  store: Store;
  bus: Bus;
  secrets: SecretBox;
  instanceId: string;
  /** Pauses before each retry (WEBHOOK_RETRY_SCHEDULE), in milliseconds. */
  retrySchedule: readonly number[];
  allowPrivateUrls: boolean;
  /** Attempts in flight on this instance, in all. */
  concurrency?: number;
  /** Attempts in flight on this instance to one endpoint: a slow endpoint holds no more than these. */
  perEndpoint?: number;
  /** How often the worker looks for due deliveries without being woken (retries, other instances' leases). */
  pollMs?: number;
  /** One line per failed attempt: no secret, no body, no URL (it may carry a token). */
  logFailure?: (fields: Record<string, unknown>, message: string) => void;
  onError?: (error: unknown, context: string) => void;
}

/**
 * Delivers webhooks (contract §9.5). Claims due deliveries under a lease longer than an attempt
 * can take, so that two instances never make the same attempt, and a crashed instance's
 * attempts are claimed again by another once its leases run out. Woken at every commit of
 * feed events (on any instance), at a retry it scheduled, and every `pollMs`. Attempts run
 * apart from the turn engine: a slow endpoint holds its own slots only.
 */
export class DeliveryWorker {
  private readonly options: Required<Omit<DeliveryWorkerOptions, 'logFailure' | 'onError'>> & Pick<DeliveryWorkerOptions, 'logFailure' | 'onError'>;
  private readonly sender: WebhookSender;
  private readonly inFlight = new Map<string, number>();
  private readonly attempts = new Set<Promise<void>>();
  private readonly observers = new Set<DeliveryObserver>();
  private readonly abort = new AbortController();
  // Longer than an attempt can take (its timeout), so that a lease never runs out under an attempt still going.
  private readonly leaseMs = DELIVERY_TIMEOUT_MS + 5_000;
  private claims = 0;
  private running = false;
  private round: Promise<void> = Promise.resolve();
  private again = false;
  private stopped = true;
  private poll: NodeJS.Timeout | null = null;
  private readonly timers = new Set<NodeJS.Timeout>();
  private unsubscribe: () => void = () => {};

  constructor(options: DeliveryWorkerOptions) {
    this.options = { concurrency: 64, perEndpoint: 4, pollMs: 1000, ...options };
    this.sender = new WebhookSender({ allowPrivate: options.allowPrivateUrls, maxSocketsPerHost: this.options.perEndpoint });
  }

  observe(observer: DeliveryObserver): () => void {
    this.observers.add(observer);
    return () => this.observers.delete(observer);
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    // One SQLite file has one server: a lease left there was cut off by a crash of this one.
    if (this.options.store.dialect === 'sqlite') await releaseAllLeases(this.options.store.db);
    // Another instance's new deliveries (this one's also come by the bus); the poll catches the rest.
    this.unsubscribe = this.options.bus.on((event) => { if (event.type === 'feed' && event.deliveries) this.wake(); });
    this.poll = setInterval(() => this.wake(), this.options.pollMs).unref();
    this.wake();
  }

  /** Looks for due deliveries now (new events, a resend). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.round = this.claimRound().catch((error: unknown) => this.options.onError?.(error, 'claiming webhook deliveries'))
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Stops claiming, aborts the attempts under way and gives their deliveries back (due again at once). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe();
    if (this.poll) clearInterval(this.poll);
    for (const timer of this.timers) clearTimeout(timer);
    this.abort.abort();
    await this.round;
    await Promise.allSettled([...this.attempts]);
    this.sender.close();
  }

  private get total(): number {
    let sum = 0;
    for (const count of this.inFlight.values()) sum += count;
    return sum;
  }

  private async claimRound(): Promise<void> {
    const { store, instanceId, concurrency, perEndpoint } = this.options;
    for (;;) {
      const room = concurrency - this.total;
      if (this.stopped || room <= 0) return;
      const now = store.clock.now();
      const leaseOwner = `${instanceId}:${++this.claims}`;
      const claimed = await claimDueDeliveries(store.db, {
        leaseOwner, now: new Date(now).toISOString(), leaseUntil: new Date(now + this.leaseMs).toISOString(), room, perEndpoint, inFlight: this.inFlight,
      });
      if (claimed.length === 0) return;
      for (const delivery of claimed) {
        this.inFlight.set(delivery.endpointId, (this.inFlight.get(delivery.endpointId) ?? 0) + 1);
        const attempt = this.attempt(delivery, leaseOwner).catch((error: unknown) => this.options.onError?.(error, 'a webhook delivery'))
          .finally(() => {
            const left = (this.inFlight.get(delivery.endpointId) ?? 1) - 1;
            if (left > 0) this.inFlight.set(delivery.endpointId, left);
            else this.inFlight.delete(delivery.endpointId);
            this.attempts.delete(attempt);
            this.wake();
          });
        this.attempts.add(attempt);
      }
    }
  }

  private async attempt(delivery: ClaimedDelivery, leaseOwner: string): Promise<void> {
    const { store, secrets, retrySchedule } = this.options;
    const secret = await secrets.open(delivery.endpointId, delivery.sealedSecret);
    const result = await this.sender.send({
      url: delivery.url, secret, webhookId: delivery.eventId, body: delivery.payload, timestampSeconds: Math.floor(store.clock.now() / 1000),
    }, this.abort.signal);
    if (this.abort.signal.aborted && result.error !== null) {
      // Cut off by the shutdown: not an attempt the endpoint failed.
      await releaseLease(store.db, delivery.id, leaseOwner);
      return;
    }
    const now = store.clock.now();
    const at = new Date(now).toISOString();
    const outcomeText = result.error ?? String(result.status);
    const ref = { id: delivery.id, endpointId: delivery.endpointId, leaseOwner };
    if (result.error === null) {
      await finishAttempt(store.db, ref, { ...result, at, state: 'delivered', retryAt: null, disableReason: null, outcome: outcomeText });
      this.tell('delivered', result);
      return;
    }
    const pause = retryPauseMs(retrySchedule, delivery.attempts);
    const attemptNumber = delivery.attempts + 1;
    if (pause === null) {
      const reason = `Disabled after ${attemptNumber} failed attempts to deliver ${delivery.eventId} (the last: ${result.error}).`;
      await finishAttempt(store.db, ref, { ...result, at, state: 'failed', retryAt: null, disableReason: reason, outcome: outcomeText });
      this.tell('gave_up', result);
    } else {
      const retryAt = new Date(now + pause).toISOString();
      await finishAttempt(store.db, ref, { ...result, at, state: 'pending', retryAt, disableReason: null, outcome: outcomeText });
      if (pause < this.options.pollMs) this.wakeIn(pause); // (a longer pause is the poll's)
      this.tell('retrying', result);
    }
    this.options.logFailure?.({
      endpoint_id: delivery.endpointId, webhook_id: delivery.eventId, event_type: delivery.eventType, attempt: attemptNumber,
      status: result.status, error: result.error, duration_ms: Math.round(result.durationMs),
      ...(pause === null ? { endpoint_disabled: true } : { retry_in_ms: pause }),
    }, 'webhook delivery attempt failed');
  }

  private wakeIn(ms: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.wake();
    }, ms + 5).unref();
    this.timers.add(timer);
  }

  private tell(outcome: DeliveryOutcome, result: SendResult): void {
    for (const observer of this.observers) observer.attempted(outcome, result.durationMs);
  }
}
