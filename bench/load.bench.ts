/**
 * What users of AI agents feel (issue 29): N conversations at once, one agent each, every turn
 * waiting `!sleep <ms>` on the built-in agent as a model call would, on a real server process with
 * default settings. Each conversation is a closed loop: send, learn of the reply, send the next.
 * Modes: `wait` (send-and-wait, the POST held until the reply), `longpoll` (POST with
 * `Prefer: wait=0`, then the transcript held with `Prefer: wait=25`), `sse` (the same POST, the
 * reply from one `GET /events` stream for the key). Reports turns a second, the added latency
 * (send to reply in hand, minus the sleep) p50/p95/p99, errors, the server's CPU a turn and its
 * RSS. Each (N, mode, round) runs on a new server process. Exits 1 on any error, lost turn or
 * request still hanging after the run.
 *
 *   npm run bench:load
 *   npm run bench:load -- --conversations 100,1000,5000 --modes wait,longpoll,sse --rounds 3 --seconds 10 --warmup 5 --sleep 1000
 *   DATABASE=postgres npm run bench:load -- --conversations 1000
 *   npm run bench:load -- --server-flags '--cpu-prof --cpu-prof-dir=/tmp/prof' --conversations 1000 --modes wait
 *   DATABASE=postgres npm run bench:load -- --pg-delay 1 --sleep 0 --conversations 1,200   (PostgreSQL 1 ms away each way)
 *   npm run bench:load -- --versus 'RUNNER_CONCURRENCY=256 LISTEN_BACKLOG=511'   (each round on the defaults and on these, alternating)
 *   npm run bench:load -- --json /tmp/load.json   (the figures, for bench/plot-latency.ts)
 *
 * The server's settings are its defaults, except that the key's rate limit never binds and the
 * pro plan allows N agents; any other variable in the environment reaches the server
 * (RUNNER_CONCURRENCY=256 to compare, say). Loopback only; N=5,000 needs `ulimit -n` ≥ 12,000.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { createRuntime } from '../src/runtime.ts';
import {
  API, CLI, cpuMicros, delayingRelay, dropPgSchemas, HUGE_LIMIT, median, percentile, PG_URL, postgresCpuMicros, serverPid, startServer, stopChildren, stopServer,
} from './lib.ts';
import { ApiClient, nowMs } from './push-client.ts';
import { longPoll, StreamedReplies, type Learned } from './replies.ts';

const { values: flags } = parseArgs({
  options: {
    conversations: { type: 'string', default: process.env.CONVERSATIONS ?? '100,1000' },
    modes: { type: 'string', default: process.env.MODES ?? 'wait' },
    rounds: { type: 'string', default: process.env.ROUNDS ?? '3' },
    seconds: { type: 'string', default: process.env.LOAD_SECONDS ?? '10' },
    warmup: { type: 'string', default: process.env.WARMUP_SECONDS ?? '5' },
    sleep: { type: 'string', default: process.env.SLEEP_MS ?? '1000' },
    'server-flags': { type: 'string', default: process.env.SERVER_FLAGS ?? '' },
    versus: { type: 'string', default: process.env.VERSUS ?? '' },
    json: { type: 'string' },
    'pg-delay': { type: 'string', default: process.env.PG_DELAY_MS ?? '0' },
  },
});
const SIZES = flags.conversations.split(',').map(Number);
const ALL_MODES = ['wait', 'longpoll', 'sse'] as const;
type Mode = typeof ALL_MODES[number];
const MODES = flags.modes.split(',') as Mode[];
const ROUNDS = Number(flags.rounds);
const SECONDS = Number(flags.seconds);
const WARMUP_SECONDS = Number(flags.warmup);
const SLEEP_MS = Number(flags.sleep);
const SERVER_FLAGS = flags['server-flags'].split(' ').filter(Boolean);
/** NAME=value (the value may hold '=' itself: NODE_OPTIONS=--flag=value). */
function setting(pair: string): [string, string] {
  const at = pair.indexOf('=');
  if (at < 1) throw new Error(`--versus: NAME=value pairs, not ${JSON.stringify(pair)}`);
  return [pair.slice(0, at), pair.slice(at + 1)];
}
// The server's settings each round runs on: its defaults, and with --versus those given, side by side.
const SETUPS: Array<{ name: string; env: Record<string, string> }> = [
  { name: 'defaults', env: {} },
  ...(flags.versus ? [{ name: flags.versus, env: Object.fromEntries(flags.versus.split(' ').filter(Boolean).map(setting)) }] : []),
];
const DATABASE = process.env.DATABASE ?? 'sqlite';
const LONG_POLL_SECONDS = 25;
// A reply not in hand this long after its message is a lost turn.
const TURN_TIMEOUT_MS = 30_000;
// After the measured window every loop finishes its turn in flight; one still open after this is hanging.
const DRAIN_MS = TURN_TIMEOUT_MS + 5_000;

if (MODES.some((mode) => !ALL_MODES.includes(mode))) throw new Error(`--modes: some of ${ALL_MODES.join(',')}`);
if (SIZES.some((n) => !(n >= 1))) throw new Error('--conversations: a list of counts, such as 100,1000,5000');
if (DATABASE !== 'sqlite' && DATABASE !== 'postgres') throw new Error('DATABASE is sqlite or postgres');

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-load-'));
const relays: Array<{ close(): void }> = [];
const schema = `load_${process.pid}`;
const env = {
  ...process.env,
  DATABASE_URL: DATABASE === 'postgres' ? `${await serversPgUrl()}?schema=${schema}` : `sqlite:${join(dir, 'bench.db')}`,
  MAX_RATE_LIMIT_PER_MINUTE: String(HUGE_LIMIT),
  PRO_PLAN_AGENT_LIMIT: String(Math.max(...SIZES)),
  HOST: '127.0.0.1',
};

/**
 * PostgreSQL as the server reaches it: with --pg-delay <ms> (whole milliseconds, as timers
 * count), through a relay that holds everything that long each way (a database on another
 * machine, twice that a round trip). The relay runs in this busy process: at least that long.
 */
async function serversPgUrl(): Promise<string> {
  const oneWayMs = Number(flags['pg-delay']);
  if (!(oneWayMs > 0)) return PG_URL;
  if (!Number.isInteger(oneWayMs)) throw new Error('--pg-delay: whole milliseconds');
  const through = new URL(PG_URL);
  const relay = await delayingRelay({ host: through.hostname, port: Number(through.port || 5432) }, oneWayMs);
  relays.push(relay);
  through.hostname = '127.0.0.1'; // where the relay listens
  through.port = String(relay.port);
  return through.toString();
}

interface Conversation { agentId: string; sessionId?: string }
/** One turn: when it was sent and when its reply was in hand (ms, this machine's clock). */
interface Sample { sentMs: number; doneMs: number }
interface RoundResult {
  turns: number; seconds: number; added: number[]; errors: Map<string, number>; hanging: number;
  cpuUsPerTurn: number; clientCpuUsPerTurn: number; databaseCpuUsPerTurn: number; rssMiB: number; loadAverage: string;
}

/** A pro user with `count` agents and a key whose limit never binds, made through the services (the CLI would take a process an agent). */
async function seed(count: number): Promise<{ token: string; agentIds: string[] }> {
  const runtime = await createRuntime({ config: loadConfig(env) });
  try {
    const { accounts, agents, keys } = runtime.services;
    const user = await accounts.createUser({ email: 'load@example.test', password: 'load-bench-password', plan: 'pro' });
    const agentIds: string[] = [];
    for (let i = 0; i < count; i++) agentIds.push((await agents.create(user.id, { agent_name: `Load ${i}` })).agent_id);
    const { token } = await keys.create(user.id, { label: 'load', rate_limit: HUGE_LIMIT });
    return { token, agentIds };
  } finally {
    await runtime.close();
  }
}

let messagesSent = 0; // every text new, so none is answered as a duplicate

/** One turn of `conversation` in `mode`; throws on any answer but the expected reply. */
async function turn(client: ApiClient, conversation: Conversation, mode: Mode, streamed: StreamedReplies): Promise<Sample> {
  const n = messagesSent++;
  const body = { text: `!sleep ${SLEEP_MS} m${n}`, ...(conversation.sessionId ? { session_id: conversation.sessionId } : { agent_id: conversation.agentId }) };
  const sentMs = nowMs();
  const sent = await client.json('POST', '/messages', body, mode === 'wait' ? {} : { prefer: 'wait=0' });
  if (sent.status >= 300 || typeof sent.body.session_id !== 'string') throw new Error(`POST /messages ${sent.status} ${sent.body.type ?? ''}`.trim());
  conversation.sessionId = sent.body.session_id;
  let learned: Learned;
  if (mode === 'wait') {
    if (sent.status !== 200 || sent.body.status !== 'completed') throw new Error(`send-and-wait answered ${sent.status} ${sent.body.status}`);
    learned = { text: sent.body.reply, ts: sent.body.reply_ts, receivedMs: sent.receivedMs };
  } else {
    learned = mode === 'longpoll'
      ? await longPoll(client, sent.body.session_id, sent.body.message_ts, LONG_POLL_SECONDS, TURN_TIMEOUT_MS)
      : await streamed.next(sent.body.session_id, sent.body.message_ts);
  }
  if (learned.text !== `You said: m${n}` || learned.error) throw new Error('a wrong reply');
  return { sentMs, doneMs: learned.receivedMs };
}

/** A short name for a failure, so that a thousand resets print as one line. */
const errorKind = (error: unknown): string => (error as NodeJS.ErrnoException).code ?? (error as Error).message.slice(0, 80);

/**
 * One round: a new server process, every conversation looping for the warm-up and the measured
 * window (starts spread over one sleep, so the turns do not march in step), then finishing its
 * turn in flight. Turns whose reply came inside the window are measured.
 */
async function round(token: string, conversations: Conversation[], mode: Mode, setup: Record<string, string>): Promise<RoundResult> {
  const origin = await startServer([...SERVER_FLAGS, CLI, 'serve'], { ...env, ...setup }, '/readyz');
  const pid = serverPid(origin)!;
  console.log(`N=${conversations.length} ${mode}: server process ${pid} (signal it for a heap snapshot with --server-flags=--heapsnapshot-signal=SIGUSR2)`);
  const client = new ApiClient(origin, API, token);
  const streamed = new StreamedReplies(TURN_TIMEOUT_MS);
  const errors = new Map<string, number>();
  const failed = (error: unknown) => errors.set(errorKind(error), (errors.get(errorKind(error)) ?? 0) + 1);
  let closeStream = () => {};
  if (mode === 'sse') closeStream = await client.stream('/events', (event) => streamed.take(event), failed);
  const samples: Sample[] = [];
  let rssKiB = 0;
  const rssTimer = setInterval(() => { rssKiB = Math.max(rssKiB, rssOf(pid)); }, 500);
  const startMs = nowMs() + WARMUP_SECONDS * 1000;
  const endMs = startMs + SECONDS * 1000;
  // The server's CPU time, this process's (the load generator's) and PostgreSQL's, at the window's start and end.
  const cpu = () => ({ server: cpuMicros(pid), client: cpuMicros(process.pid), database: DATABASE === 'postgres' ? postgresCpuMicros() : Number.NaN });
  let cpuAtStart = { server: Number.NaN, client: Number.NaN, database: Number.NaN };
  let cpuAtEnd = cpuAtStart;
  const cpuTimers = [setTimeout(() => { cpuAtStart = cpu(); }, WARMUP_SECONDS * 1000), setTimeout(() => { cpuAtEnd = cpu(); }, (WARMUP_SECONDS + SECONDS) * 1000)];
  let open = 0;
  try {
    const loops = conversations.map(async (conversation) => {
      open++;
      await sleep(Math.random() * SLEEP_MS);
      while (nowMs() < endMs) {
        try {
          samples.push(await turn(client, conversation, mode, streamed));
        } catch (error) {
          failed(error);
          await sleep(100); // an error is counted, not hammered on
        }
      }
      open--;
    });
    await Promise.race([Promise.all(loops), sleep(WARMUP_SECONDS * 1000 + SECONDS * 1000 + DRAIN_MS)]);
  } finally {
    clearInterval(rssTimer);
    for (const timer of cpuTimers) clearTimeout(timer);
    closeStream();
    client.close();
    await stopServer(origin);
  }
  const measured = samples.filter((s) => s.doneMs >= startMs && s.doneMs < endMs);
  return {
    turns: measured.length, seconds: SECONDS, added: measured.map((s) => s.doneMs - s.sentMs - SLEEP_MS).sort((a, b) => a - b),
    errors, hanging: open, cpuUsPerTurn: (cpuAtEnd.server - cpuAtStart.server) / measured.length,
    clientCpuUsPerTurn: (cpuAtEnd.client - cpuAtStart.client) / measured.length,
    databaseCpuUsPerTurn: (cpuAtEnd.database - cpuAtStart.database) / measured.length, rssMiB: rssKiB / 1024, loadAverage: loadAverage(),
  };
}

/** The resident set of a process, in KiB (Linux), else 0. */
function rssOf(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The machine's load averages (1, 5, 15 minutes): other work sharing the cores shows here. */
function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

interface Row { n: number; mode: Mode; setup: string; turnsPerSecond: number; p50: number; p95: number; p99: number; errors: number; hanging: number; cpuUs: number; databaseCpuUs: number; rssMiB: number }

let failed = false;
const rows: Row[] = [];
try {
  console.log(`${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; ${DATABASE}; !sleep ${SLEEP_MS}; `
    + `${ROUNDS} round(s) a size, mode and setup, each on a new server process: warm-up ${WARMUP_SECONDS} s, measured ${SECONDS} s; load average ${loadAverage()}`);
  const seeded = await seed(Math.max(...SIZES));
  const conversations = seeded.agentIds.map((agentId): Conversation => ({ agentId }));
  for (const n of SIZES) {
    for (const mode of MODES) {
      const results = new Map(SETUPS.map((setup) => [setup.name, [] as RoundResult[]]));
      for (let r = 1; r <= ROUNDS; r++) {
        // Alternating which setup goes first, so that neither always meets a warmer (or busier) machine.
        for (const setup of r % 2 === 1 ? SETUPS : [...SETUPS].reverse()) {
          const result = await round(seeded.token, conversations.slice(0, n), mode, setup.env);
          results.get(setup.name)!.push(result);
          const p = (q: number) => percentile(result.added, q)?.toFixed(1) ?? '-';
          const errors = [...result.errors].map(([kind, count]) => `${count}× ${kind}`).join(', ') || 'none';
          console.log(`N=${n} ${mode} ${setup.name} round ${r}: ${(result.turns / result.seconds).toFixed(0)} turns/s, added p50 ${p(0.5)} p95 ${p(0.95)} p99 ${p(0.99)} ms, `
            + `errors ${errors}, hanging ${result.hanging}, CPU a turn ${result.cpuUsPerTurn.toFixed(0)} µs server, ${result.clientCpuUsPerTurn.toFixed(0)} µs load generator${DATABASE === 'postgres' ? `, ${result.databaseCpuUsPerTurn.toFixed(0)} µs PostgreSQL` : ''}, RSS max ${result.rssMiB.toFixed(0)} MiB (load average ${result.loadAverage})`);
          if (result.errors.size > 0 || result.hanging > 0) failed = true;
        }
      }
      for (const [setup, of] of results) {
        const m = (pick: (r: RoundResult) => number) => median(of.map(pick));
        const q = (p: number) => m((r) => percentile(r.added, p) ?? Number.NaN);
        rows.push({
          n, mode, setup, turnsPerSecond: m((r) => r.turns / r.seconds), p50: q(0.5), p95: q(0.95), p99: q(0.99),
          errors: of.reduce((sum, r) => sum + [...r.errors.values()].reduce((a, b) => a + b, 0), 0),
          hanging: of.reduce((sum, r) => sum + r.hanging, 0), cpuUs: m((r) => r.cpuUsPerTurn), databaseCpuUs: m((r) => r.databaseCpuUsPerTurn), rssMiB: m((r) => r.rssMiB),
        });
      }
    }
  }
  console.log(`
| conversations | mode | settings | turns/s | added p50 (ms) | p95 | p99 | errors | hanging | server CPU a turn (µs) | PostgreSQL CPU a turn (µs) | RSS (MiB) |
|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.map((r) => `| ${r.n} | ${r.mode} | ${r.setup} | ${r.turnsPerSecond.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.errors} | ${r.hanging} | ${r.cpuUs.toFixed(0)} | ${Number.isNaN(r.databaseCpuUs) ? '-' : r.databaseCpuUs.toFixed(0)} | ${r.rssMiB.toFixed(0)} |`).join('\n')}

(medians of ${ROUNDS} round(s); ${DATABASE}; !sleep ${SLEEP_MS}; load average at the end ${loadAverage()})`);
  if (flags.json) writeFileSync(flags.json, JSON.stringify({ database: DATABASE, sleepMs: SLEEP_MS, rounds: ROUNDS, rows }, null, 2));
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await stopChildren();
  for (const relay of relays) relay.close();
  rmSync(dir, { recursive: true, force: true });
  if (DATABASE === 'postgres') {
    await dropPgSchemas(schema);
  }
}
if (failed) console.error('FAILED: an error, a lost turn or a hanging request (see above)');
process.exit(failed ? 1 : 0);
