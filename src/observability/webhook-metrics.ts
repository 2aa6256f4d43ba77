import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { DELIVERY_OUTCOMES, type DeliveryObserver } from '../domain/webhooks.ts';

/** What the webhook metrics are read from. */
export interface WebhookSources {
  /** Subscribes to this instance's delivery attempts; returns the unsubscribe. */
  observeWebhooks(observer: DeliveryObserver): () => void;
  /** Deliveries not yet made, by endpoint, of the whole deployment; may fail (the database away). */
  webhookBacklog(): Promise<Array<{ endpointId: string; count: number }>>;
}

/**
 * Webhook delivery (contract §9.5): attempts by outcome and how long they took on this instance,
 * and the deployment's deliveries still to make, per endpoint. Returns the unsubscribe.
 */
export function installWebhookMetrics(registry: Registry, sources: WebhookSources): () => void {
  const attempts = new Counter({
    name: 'webhook_deliveries_total', help: 'Webhook delivery attempts on this instance by outcome (delivered; retrying: failed, tried again later; gave_up: the last of the schedule failed, the endpoint disabled).',
    labelNames: ['outcome'] as const, registers: [registry],
  });
  const latency = new Histogram({
    name: 'webhook_delivery_duration_seconds', help: 'Time a webhook delivery attempt took, from its request to its answer (or failure), by outcome.',
    labelNames: ['outcome'] as const, registers: [registry], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });
  for (const outcome of DELIVERY_OUTCOMES) {
    attempts.inc({ outcome }, 0);
    latency.zero({ outcome });
  }
  new Gauge({
    name: 'webhook_backlog', help: 'Webhook deliveries not yet made, by endpoint (every instance reports the same; absent while the database does not answer).',
    labelNames: ['endpoint'] as const, registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const { endpointId, count } of await sources.webhookBacklog()) this.set({ endpoint: endpointId }, count);
      } catch {
        // no figure rather than a stale one
      }
    },
  });
  return sources.observeWebhooks({
    attempted(outcome, durationMs) {
      attempts.inc({ outcome });
      latency.observe({ outcome }, durationMs / 1000);
    },
  });
}
