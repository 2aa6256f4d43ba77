/**
 * GET /agents with a valid key on our real server, against a bare Fastify route returning the
 * same JSON, in one process tree and one run. Rounds alternate between the two so that machine
 * noise hits both; figures are medians over rounds. Then a micro-measure of what auth plus rate
 * limit cost per request in-process. Loopback only; about two minutes in all.
 *
 *   npx node bench/agents.bench.ts            (or: npm run bench:agents)
 *   ROUNDS=5 ROUND_SECONDS=8 WARMUP_SECONDS=6 CONNECTIONS=10 LOG_LEVEL=info npx node bench/agents.bench.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryRateLimiter } from '../src/ratelimit/memory.ts';
import { KeysService } from '../src/services/keys.ts';
import { RequestCache } from '../src/services/request-cache.ts';
import { openStore } from '../src/store/store.ts';
import {
  alternatingRounds, CLI, HUGE_LIMIT, load as loadRound, percentile, roundOnFreshServer, seedAccount, startServer, stopChildren, stopServer,
  summarize, type RoundResult,
} from './lib.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const ROUND_SECONDS = Number(process.env.ROUND_SECONDS ?? 8);
// Each round's new processes are loaded this long before they are measured, until V8's optimising
// compiler has settled (its thread: 7 µs a request in the first 3 s, 2 in the next, under 1 after 6).
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 10);
const MICRO_ITERATIONS = 20_000;
const PATH = '/api/v1/api-channel/agents';

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-bench-'));
const env = {
  ...process.env,
  DATABASE_URL: `sqlite:${join(dir, 'bench.db')}`,
  MAX_RATE_LIMIT_PER_MINUTE: String(HUGE_LIMIT),
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'info', // the server as it runs by default: one log line per request
  HOST: '127.0.0.1',
};

const load = (url: string, authorization: string | undefined, seconds: number): Promise<RoundResult> =>
  loadRound({ url, connections: CONNECTIONS, duration: seconds, headers: authorization ? { authorization } : {} });

/** KeysService.authenticate + MemoryRateLimiter.take, in-process, on the benchmark's database. */
async function microAuthAndRateLimit(authorization: string): Promise<{ p50: number; p99: number }> {
  const store = await openStore(env.DATABASE_URL);
  const requestCache = new RequestCache(store);
  const keys = new KeysService({ store, keyCache: requestCache.keys, defaultRateLimitPerMinute: 60, maxRateLimitPerMinute: HUGE_LIMIT });
  const limiter = new MemoryRateLimiter();
  const samples: number[] = [];
  try {
    for (let i = 0; i < MICRO_ITERATIONS + 1000; i++) {
      const start = process.hrtime.bigint();
      requestCache.dropIfWrittenElsewhere(); // as the server does at each request
      const key = await keys.authenticate(authorization);
      const verdict = await limiter.take(key!.keyId, key!.rateLimit);
      const elapsedMs = Number(process.hrtime.bigint() - start) / 1e6;
      if (!verdict.allowed) throw new Error('rate limited during the micro-measure');
      if (i >= 1000) samples.push(elapsedMs); // the first thousand warm the JIT and statement cache
    }
    await keys.settled();
  } finally {
    await store.close();
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 0.5), p99: percentile(samples, 0.99) };
}

try {
  const { token } = seedAccount(env, 1);
  const authorization = `Bearer ${token}`;

  // What ours answers is what the bare route must answer, byte for byte.
  const probe = await startServer([CLI, 'serve'], env, '/readyz');
  const body = await (await fetch(probe + PATH, { headers: { authorization } })).text();
  await stopServer(probe);
  const bareArgs = [join(import.meta.dirname, 'bare-server.ts')];
  const bareEnv = { ...env, BODY_JSON: body };
  const bare = await startServer(bareArgs, bareEnv, PATH);
  if ((await (await fetch(bare + PATH)).text()) !== body) throw new Error('the bare route must return the same JSON');
  await stopServer(bare);

  console.log(`${ROUNDS} alternating rounds of ${ROUND_SECONDS} s, each on new server processes warmed for ${WARMUP_SECONDS} s, ${CONNECTIONS} connections`);
  const runOurs = roundOnFreshServer([CLI, 'serve'], env, '/readyz', WARMUP_SECONDS, (origin, seconds) => load(origin + PATH, authorization, seconds));
  const runBare = roundOnFreshServer(bareArgs, bareEnv, PATH, WARMUP_SECONDS, (origin, seconds) => load(origin + PATH, undefined, seconds));
  const rounds = await alternatingRounds(ROUNDS, () => runOurs(ROUND_SECONDS), () => runBare(ROUND_SECONDS));
  // No server runs during the micro-measure: it must have the cores (and the SQLite file) to itself.

  const micro = await microAuthAndRateLimit(authorization);
  const summary = summarize(rounds);
  console.log(`
| medians over ${ROUNDS} rounds | throughput (req/s) | p50 (ms) | p99 (ms) | server CPU per request (µs) |
|---|---|---|---|---|
| agent-channel GET /agents (key auth + rate limit + SQLite, LOG_LEVEL=${env.LOG_LEVEL}) | ${summary.ours.rps.toFixed(0)} | ${summary.ours.p50} | ${summary.ours.p99} | ${summary.ours.cpuUs.toFixed(1)} |
| bare Fastify route, same JSON | ${summary.bare.rps.toFixed(0)} | ${summary.bare.p50} | ${summary.bare.p99} | ${summary.bare.cpuUs.toFixed(1)} |
| ratio (median of per-round ratios) | ${(summary.ratio * 100).toFixed(1)}% | | | |

auth + rate limit in-process (KeysService.authenticate + MemoryRateLimiter.take, ${MICRO_ITERATIONS} iterations):
p50 ${(micro.p50 * 1000).toFixed(1)} µs, p99 ${(micro.p99 * 1000).toFixed(1)} µs

machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, ${CONNECTIONS} connections`);
} finally {
  await stopChildren();
  rmSync(dir, { recursive: true, force: true });
}
