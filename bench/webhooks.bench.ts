/**
 * Webhook delivery (issue 25): 1,000 events to 10 endpoints on loopback. A real server process
 * (SQLite by default) with one account, 10 endpoints registered with the CLI (every event type),
 * each a plain Node http receiver answering 204 at once; 1,000 messages sent (20 at a time), each
 * reply a `turn.completed` event, so 10,000 deliveries. Delivery latency: a request's arrival at
 * its receiver minus its event's `created_at` (written in the event's transaction, by the same
 * machine's clock). Events a second: events reaching all 10 endpoints, from the first send to the
 * last delivery.
 *
 *   npm run bench:webhooks
 *   EVENTS=1000 ENDPOINTS=10 SENDERS=20 DATABASE=sqlite|postgres npm run bench:webhooks
 *
 * Loopback only; well under a minute. Exits 1 if a delivery is missing or arrives twice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API, CLI, cliOf, cpuMicros, dropPgSchemas, percentile, PG_URL, seedAccount, serverPid, startServer, stopChildren } from './lib.ts';

const EVENTS = Number(process.env.EVENTS ?? 1000);
const ENDPOINTS = Number(process.env.ENDPOINTS ?? 10);
const SENDERS = Number(process.env.SENDERS ?? 20);
const DATABASE = process.env.DATABASE ?? 'sqlite';

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-bench-webhooks-'));
const schema = `bench_webhooks_${process.pid}`;
const env: NodeJS.ProcessEnv = {
  ...process.env, DATABASE_URL: DATABASE === 'postgres' ? `${PG_URL}?schema=${schema}` : `sqlite:${join(dir, 'bench.db')}`,
  SCRYPT_COST_LOG2: '10', LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true', DUPLICATE_WINDOW_MS: '0',
  HOST: '127.0.0.1', MAX_RATE_LIMIT_PER_MINUTE: '50000000',
};

interface Arrival { endpoint: number; webhookId: string; latencyMs: number; at: number }
const arrivals: Arrival[] = [];
const receivers: Server[] = [];

async function receiver(endpoint: number): Promise<string> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { created_at: string };
      arrivals.push({ endpoint, webhookId: String(request.headers['webhook-id']), latencyMs: at - Date.parse(event.created_at), at });
      response.writeHead(204).end();
    });
  });
  receivers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

async function main(): Promise<void> {
  const { agentIds, token } = seedAccount(env, 1);
  for (let i = 0; i < ENDPOINTS; i++) cliOf(CLI, env, 'webhooks', 'create', '--email', 'bench@example.test', '--url', await receiver(i));
  const origin = await startServer([CLI, 'serve'], env, '/readyz');
  const pid = serverPid(origin)!;
  const cpuBefore = cpuMicros(pid);
  const started = Date.now();
  let next = 0;
  await Promise.all(Array.from({ length: SENDERS }, async () => {
    while (next < EVENTS) {
      const n = next++;
      const res = await fetch(`${origin}${API}/messages`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: `hook ${n}`, agent_id: agentIds[0] }),
      });
      if (res.status !== 200) throw new Error(`POST /messages answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
  }));
  const sentMs = Date.now() - started;
  const deadline = Date.now() + 120_000;
  while (arrivals.length < EVENTS * ENDPOINTS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 500)); // a late duplicate would show now
  const cpuMs = (cpuMicros(pid) - cpuBefore) / 1000;
  const unique = new Set(arrivals.map((a) => `${a.endpoint} ${a.webhookId}`));
  const lastAt = Math.max(...arrivals.map((a) => a.at));
  const latencies = arrivals.map((a) => a.latencyMs).sort((a, b) => a - b);
  const seconds = (lastAt - started) / 1000;
  console.log(`${DATABASE}: ${EVENTS} events × ${ENDPOINTS} endpoints, ${SENDERS} senders`);
  console.log(`  sent in ${(sentMs / 1000).toFixed(2)} s; last delivery after ${seconds.toFixed(2)} s`);
  console.log(`  deliveries ${arrivals.length} (unique ${unique.size} of ${EVENTS * ENDPOINTS})`);
  console.log(`  delivery latency p50 ${percentile(latencies, 0.5)} ms, p99 ${percentile(latencies, 0.99)} ms, max ${latencies.at(-1)} ms`);
  console.log(`  events a second (each to all ${ENDPOINTS}): ${(EVENTS / seconds).toFixed(0)}; deliveries a second: ${(arrivals.length / seconds).toFixed(0)}`);
  console.log(`  server CPU: ${cpuMs.toFixed(0)} ms (${((cpuMs * 1000) / arrivals.length).toFixed(0)} µs a delivery, turns included)`);
  if (unique.size !== EVENTS * ENDPOINTS || arrivals.length !== unique.size) process.exitCode = 1;
}

try {
  await main();
} finally {
  await stopChildren();
  for (const server of receivers) server.close();
  rmSync(dir, { recursive: true, force: true });
  if (DATABASE === 'postgres') {
    await dropPgSchemas(schema);
  }
}
