/**
 * POST /messages with plain text (built-in agent, so the turn itself is instant) on our real
 * server, against a bare Node http server answering a POST with fixed JSON, in one process tree
 * and one run; rounds alternate so machine noise hits both; medians over rounds. Then
 * GET /sessions/{id}/messages?after=… on a session of 100,000 turns.
 *
 *   npm run bench:messages
 *   ROUNDS=5 ROUND_SECONDS=8 WARMUP_SECONDS=10 CONNECTIONS=50 DATABASE=sqlite|postgres npx node bench/messages.bench.ts
 *
 * Loopback only; about four minutes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatTs, nowMicros } from '../src/domain/turn-clock.ts';
import { openStore } from '../src/store/store.ts';
import {
  alternatingRounds, API, assertEveryMessageCompleted, CLI, dropPgSchemas, HUGE_LIMIT, load, median, messageRequests, PG_URL, roundOnFreshServer, seedAccount, startServer, stopChildren, summarize, type RoundResult,
} from './lib.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const ROUND_SECONDS = Number(process.env.ROUND_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const AGENTS = Number(process.env.AGENTS ?? 50);
const TRANSCRIPT_TURNS = 100_000;
const DATABASE = process.env.DATABASE ?? 'sqlite';
// Each round's new processes are loaded this long before they are measured: under this load V8's
// optimising compiler works for about 8 s (its thread took 47 µs a turn in the 5 s after a 3 s
// warm-up, 10 µs in the next, measured per thread), and a long-running server has long settled.
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 10);

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-bench-'));
const schema = `bench_${process.pid}`;
const databaseUrl = DATABASE === 'postgres'
  ? `${PG_URL}?schema=${schema}`
  : `sqlite:${join(dir, 'bench.db')}`;
const env = {
  ...process.env,
  DATABASE_URL: databaseUrl,
  MAX_RATE_LIMIT_PER_MINUTE: String(HUGE_LIMIT),
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  HOST: '127.0.0.1',
  DUPLICATE_WINDOW_MS: '10000',
};

try {
  const { agentIds, token } = seedAccount(env, AGENTS);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

  const runOurs = roundOnFreshServer([CLI, 'serve'], env, '/readyz', WARMUP_SECONDS,
    (origin, seconds) => load({ url: origin, connections: CONNECTIONS, duration: seconds, headers, requests: messageRequests(agentIds) }));
  const runBare = roundOnFreshServer([join(import.meta.dirname, 'bare-http-server.ts')], env, '/', WARMUP_SECONDS, (origin, seconds) => load({
    url: origin, connections: CONNECTIONS, duration: seconds, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'hello' }),
  }));
  console.log(`${cpus().length} cores; ${DATABASE}; ${ROUNDS} alternating rounds of ${ROUND_SECONDS} s, each on new server processes warmed for ${WARMUP_SECONDS} s, ${CONNECTIONS} connections, ${AGENTS} agents`);
  const rounds = await alternatingRounds(ROUNDS, () => runOurs(ROUND_SECONDS), () => runBare(ROUND_SECONDS), 'turns/s');
  assertEveryMessageCompleted();

  // A server for the transcript part; a last message shows that the rounds left nothing behind.
  const ours = await startServer([CLI, 'serve'], env, '/readyz');
  const status = await (await fetch(`${ours}${API}/messages`, { method: 'POST', headers, body: JSON.stringify({ text: 'final', agent_id: agentIds[0] }) })).json() as any;
  if (status.status !== 'completed') throw new Error(`final message: ${JSON.stringify(status)}`);

  // The transcript: one session of 100,000 turns, written straight into the store.
  const sessionId = status.session_id as string;
  await seedTranscript(sessionId);
  const page = await (await fetch(`${ours}${API}/sessions/${sessionId}/messages?limit=1`, { headers })).json() as any;
  const afterMiddle = (await (await fetch(`${ours}${API}/sessions/${sessionId}/messages?limit=200&after=${encodeURIComponent(page.messages[0].ts)}`, { headers })).json() as any);
  if (!afterMiddle.has_more) throw new Error('seeding failed');
  const cursorTs = (await readTsAt(sessionId, TRANSCRIPT_TURNS - 60));
  // One poller (the integrator's case), then ten at once.
  const transcriptRuns: Record<number, RoundResult[]> = { 1: [], 10: [] };
  for (let round = 0; round < 3; round++) {
    for (const connections of [1, 10]) {
      transcriptRuns[connections]!.push(await load({
        url: `${ours}${API}/sessions/${sessionId}/messages?after=${encodeURIComponent(cursorTs)}&limit=50`,
        connections, duration: ROUND_SECONDS, headers,
      }));
    }
  }
  await stopChildren();

  const summary = summarize(rounds);
  console.log(`
| medians over ${ROUNDS} rounds, ${CONNECTIONS} connections (${DATABASE}) | throughput | p50 (ms) | p99 (ms) | server CPU per request (µs) |
|---|---|---|---|---|
| agent-channel POST /messages, completed turns (LOG_LEVEL=${env.LOG_LEVEL}) | ${summary.ours.rps.toFixed(0)} turns/s | ${summary.ours.p50} | ${summary.ours.p99} | ${summary.ours.cpuUs.toFixed(0)} |
| bare Node http POST, fixed JSON | ${summary.bare.rps.toFixed(0)} req/s | ${summary.bare.p50} | ${summary.bare.p99} | ${summary.bare.cpuUs.toFixed(0)} |
| ratio (median of per-round ratios) | ${(summary.ratio * 100).toFixed(1)}% | | | |

GET /sessions/{id}/messages?after=…&limit=50 on a session of ${TRANSCRIPT_TURNS.toLocaleString('en')} turns, medians of 3 rounds:
${[1, 10].map((c) => `| ${c} connection${c > 1 ? 's' : ''} | ${median(transcriptRuns[c]!.map((r) => r.rps)).toFixed(0)} req/s | p50 ${median(transcriptRuns[c]!.map((r) => r.p50))} ms | p99 ${median(transcriptRuns[c]!.map((r) => r.p99))} ms |`).join('\n')}`);
} finally {
  await stopChildren();
  rmSync(dir, { recursive: true, force: true });
  if (DATABASE === 'postgres') {
    await dropPgSchemas(schema);
  }
}

/** Appends TRANSCRIPT_TURNS turns to the session directly (the HTTP path is measured above). */
async function seedTranscript(sessionId: string): Promise<void> {
  const store = await openStore(databaseUrl);
  try {
    let micros = nowMicros();
    const batch = 500;
    for (let start = 0; start < TRANSCRIPT_TURNS; start += batch) {
      const rows = Array.from({ length: batch }, (_, i) => {
        micros += 1n;
        const n = start + i;
        return { session_id: sessionId, role: n % 2 ? 'agent' as const : 'user' as const, text: `turn ${n}`, ts: formatTs(micros), error: null, job_id: null };
      });
      await store.db.insertInto('turns').values(rows).execute();
    }
    await store.db.updateTable('sessions').set({ last_ts: formatTs(micros) }).where('id', '=', sessionId).execute();
  } finally {
    await store.close();
  }
}

async function readTsAt(sessionId: string, index: number): Promise<string> {
  const store = await openStore(databaseUrl);
  try {
    const row = await store.db.selectFrom('turns').select('ts').where('session_id', '=', sessionId).orderBy('ts').offset(index).limit(1).executeTakeFirstOrThrow();
    return row.ts;
  } finally {
    await store.close();
  }
}
