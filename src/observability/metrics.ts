import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { OpenJobCounts } from '../engine/queue-sql.ts';
import { JOB_KINDS } from '../store/schema.ts';
import { RUN_OUTCOMES, type TurnObserver } from '../engine/turn-engine.ts';
import { RELEASE } from '../release.ts';
import { installWebhookMetrics, type WebhookSources } from './webhook-metrics.ts';

/** What the instance reports beside its requests: read at each scrape, or told as turns run. */
export interface InstanceSources extends WebhookSources {
  /** Requests held open waiting for their turn to end (POST /messages, the web chat). */
  awaitingReply(): number;
  /** Jobs running on this instance's runner now. */
  turnsRunning(): number;
  /** The deployment's unfinished jobs by status; may fail or give up (the database away). */
  openJobs(): Promise<OpenJobCounts>;
  /** Subscribes to this instance's runs; returns the unsubscribe. */
  observeTurns(observer: TurnObserver): () => void;
}

/** Seconds, from a millisecond to the longest turn the built-in agent takes (`!sleep` up to 10 minutes). */
const TURN_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600];

/** What installMetrics gives the app: the registry, and what to call once each answer is written out. */
export interface Metrics {
  registry: Registry;
  /** Counts an answered request; the app's one onResponse hook calls it (a hook of its own costs more than its work). */
  observe(request: FastifyRequest, reply: FastifyReply): void;
}

/**
 * Prometheus metrics of one app instance, served at /metrics: requests by route and status and
 * their latency, requests waiting for a reply, and the turn engine's runs (outcomes, time in line,
 * time running, resumed runs) with the deployment's queue.
 */
export function installMetrics(app: FastifyInstance, sources: InstanceSources): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Prometheus' usual build-info series: which release each instance runs (a rollout shows as two).
  new Gauge({
    name: 'agent_channel_build_info', help: 'Always 1; its labels name the release and the Node.js version this instance runs.',
    labelNames: ['version', 'node'] as const, registers: [registry],
  }).set({ version: RELEASE, node: process.versions.node }, 1);
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
    collect() { this.set(sources.awaitingReply()); },
  });
  new Gauge({
    name: 'turns_running', help: 'Jobs (turns) running on this instance now.',
    registers: [registry],
    collect() { this.set(sources.turnsRunning()); },
  });
  new Gauge({
    name: 'jobs_open', help: 'Unfinished jobs of the whole deployment by status (every instance reports the same; absent while the database does not answer).',
    labelNames: ['status'] as const, registers: [registry],
    async collect() {
      try {
        const counts = await sources.openJobs();
        for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
      } catch {
        this.reset(); // no figure rather than a stale one; /readyz says why
      }
    },
  });
  const runs = new Counter({
    name: 'turns_total', help: 'Runs of jobs on this instance by kind and outcome (done, failed, or requeued: not finished here, it runs again).',
    labelNames: ['kind', 'outcome'] as const, registers: [registry],
  });
  const resumed = new Counter({
    name: 'turns_resumed_total', help: 'Runs on this instance of a job whose earlier run was cut off (a crash, a lost lease, a shutdown).',
    labelNames: ['kind'] as const, registers: [registry],
  });
  const queueWait = new Histogram({
    name: 'turn_queue_wait_seconds', help: 'Time a job waited in line from its acceptance to its first run, by kind.',
    labelNames: ['kind'] as const, registers: [registry], buckets: TURN_BUCKETS,
  });
  const runTime = new Histogram({
    name: 'turn_duration_seconds', help: 'Time a run of a job took on this instance, outcome written, by kind.',
    labelNames: ['kind'] as const, registers: [registry], buckets: TURN_BUCKETS,
  });
  const slotWaits = new Counter({
    name: 'turns_waited_for_slot_total', help: 'Jobs accepted on this instance while every one of its RUNNER_CONCURRENCY slots was busy: they waited in line for one.',
    labelNames: ['kind'] as const, registers: [registry],
  });
  // Every series there from the first scrape, at 0: a rate() over a counter that appears at 1 misses that 1.
  for (const kind of JOB_KINDS) {
    for (const outcome of RUN_OUTCOMES) runs.inc({ kind, outcome }, 0);
    resumed.inc({ kind }, 0);
    slotWaits.inc({ kind }, 0);
    queueWait.zero({ kind });
    runTime.zero({ kind });
  }
  const stopObserving = sources.observeTurns({
    started({ kind, waitedMs, resumed: again }) {
      if (again) resumed.inc({ kind });
      if (waitedMs !== null) queueWait.observe({ kind }, waitedMs / 1000);
    },
    ended({ kind, outcome, ranMs }) {
      runs.inc({ kind, outcome });
      if (outcome !== 'requeued') runTime.observe({ kind }, ranMs / 1000);
    },
    waitsForSlot({ kind }) {
      slotWaits.inc({ kind });
    },
  });
  const stopObservingWebhooks = installWebhookMetrics(registry, sources);
  app.addHook('onClose', (_instance, done) => { stopObserving(); stopObservingWebhooks(); done(); });

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
