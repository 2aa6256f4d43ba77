import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** What the instance reports beside its requests, read at each scrape. */
export interface InstanceGauges {
  /** Requests held open waiting for their turn to end (POST /messages, the web chat). */
  awaitingReply(): number;
}

/** What installMetrics gives the app: the registry, and what to call once each answer is written out. */
export interface Metrics {
  registry: Registry;
  /** Counts an answered request; the app's one onResponse hook calls it (a hook of its own costs more than its work). */
  observe(request: FastifyRequest, reply: FastifyReply): void;
}

/** Prometheus metrics of one app instance: requests by route and status, latency, and waits; served at /metrics. */
export function installMetrics(app: FastifyInstance, gauges: InstanceGauges): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'http_requests_total', help: 'HTTP requests by route and status.',
    labelNames: ['method', 'route', 'status'] as const, registers: [registry],
  });
  const latency = new Histogram({
    name: 'http_request_duration_seconds', help: 'HTTP request latency by route.',
    labelNames: ['method', 'route'] as const, registers: [registry],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  new Gauge({
    name: 'requests_awaiting_reply', help: 'Requests on this instance held open waiting for their turn to end.',
    registers: [registry],
    collect() { this.set(gauges.awaitingReply()); },
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
  return {
    registry,
    observe(request, reply) {
      const route = request.routeOptions.url ?? 'unmatched';
      requests.inc({ method: request.method, route, status: String(reply.statusCode) });
      latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    },
  };
}
