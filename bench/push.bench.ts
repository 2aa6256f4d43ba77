/**
 * How soon a client learns of a reply (issue 24): 100 conversations, each on an agent of its
 * own, each sending `!sleep 200 …` and learning of the reply in one of four ways, on a real
 * server process; then the next message. The modes, one after another on the same process:
 *   wait      send-and-wait: a plain POST /messages that returns with the reply (the baseline)
 *   poll      POST with `Prefer: wait=0` (202 at once), then the transcript `?after=<message_ts>` every 250 ms
 *   longpoll  the same POST, then the transcript `?after=<message_ts>` held with `Prefer: wait=25`
 *   sse       the same POST, then the session's `turn.completed` from a GET /events stream (one for the key)
 * Learning latency: the moment the answer's last byte reached the client minus the reply's `ts`,
 * which the finishing transaction writes just before its commit, from the same machine's clock
 * (so the figure includes the commit itself). Each round runs on a new server process, warmed
 * with send-and-wait, then each mode warms for a few seconds and is measured; odd rounds run the
 * modes in this order, even rounds in reverse. Server CPU from /proc over each measured window.
 *
 *   npm run bench:push
 *   ROUNDS=2 WARMUP_SECONDS=10 MODE_WARMUP_SECONDS=3 MODE_SECONDS=15 CONVERSATIONS=100 STREAMS=1 DATABASE=sqlite|postgres npm run bench:push
 *   MODES=longpoll SERVER_FLAGS='--cpu-prof --cpu-prof-dir=/tmp/prof' npm run bench:push   (some modes, send-and-wait always; the server profiled)
 *
 * Loopback only; about three minutes. Exits 1 on any unexpected answer or a turn never learned of.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  API, CLI, cpuMicros, dropPgSchemas, HUGE_LIMIT, median, percentile, PG_URL, runQueueWaitMs, seedAccount, serverPid, startServer, stopChildren, stopServer,
} from './lib.ts';
import { ApiClient, nowMs, tsMs } from './push-client.ts';
import { agentTurnOf, longPoll, StreamedReplies, type Learned } from './replies.ts';

const ROUNDS = Number(process.env.ROUNDS ?? 2);
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 10);
const MODE_WARMUP_SECONDS = Number(process.env.MODE_WARMUP_SECONDS ?? 3);
const MODE_SECONDS = Number(process.env.MODE_SECONDS ?? 15);
const CONVERSATIONS = Number(process.env.CONVERSATIONS ?? 100);
// Every stream carries all of the key's events; each serves its share of the conversations.
const STREAMS = Number(process.env.STREAMS ?? 1);
const DATABASE = process.env.DATABASE ?? 'sqlite';
const SLEEP_MS = 200;
const POLL_MS = 250;
const LONG_POLL_SECONDS = 25;
// A reply not learned of this long after its message is a lost turn, and fails the run.
const TURN_TIMEOUT_MS = 10_000;
// A message's `ts` must fall between its request's start and its answer's arrival, give or take this.
const CLOCK_TOLERANCE_MS = 1;

const ALL_MODES = ['wait', 'poll', 'longpoll', 'sse'] as const;
type Mode = typeof ALL_MODES[number];
// Send-and-wait is always measured: the other modes' CPU is given as a ratio to it.
const MODES = ALL_MODES.filter((mode) => mode === 'wait' || (process.env.MODES ?? ALL_MODES.join(',')).split(',').includes(mode));
// Extra node flags for the server process (a profiler, say).
const SERVER_FLAGS = (process.env.SERVER_FLAGS ?? '').split(' ').filter(Boolean);
const LABELS: Record<Mode, string> = {
  wait: 'send-and-wait (POST held until the reply)',
  poll: `polling every ${POLL_MS} ms (transcript, after=message_ts)`,
  longpoll: `long-poll (transcript, after=message_ts, Prefer: wait=${LONG_POLL_SECONDS})`,
  sse: `SSE (GET /events, ${STREAMS} stream${STREAMS > 1 ? 's' : ''} for the key)`,
};

interface Conversation { agentId: string; sessionId?: string; stream: number }
/** A turn: when it was sent, how long after the reply's commit the client knew, how long the send took, and from message ts to reply ts. */
interface Sample { sentMs: number; latencyMs: number; sendMs: number; turnMs: number }
/**
 * A mode's measured window. `serverWaitMs`, `clientWaitMs`: how long the server's and this
 * process's main threads waited for a core in it, per second.
 */
interface ModeResult {
  samples: Sample[]; turns: number; seconds: number; cpuUsPerTurn: number; requests: number; serverWaitMs: number; clientWaitMs: number;
}

if (DATABASE !== 'sqlite' && DATABASE !== 'postgres') throw new Error('DATABASE is sqlite or postgres');
if (!(STREAMS >= 1 && STREAMS <= 10)) throw new Error('STREAMS is 1 to 10 (a key holds at most 10)');

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-push-'));
const schema = `push_${process.pid}`;
const env = {
  ...process.env,
  DATABASE_URL: DATABASE === 'postgres' ? `${PG_URL}?schema=${schema}` : `sqlite:${join(dir, 'bench.db')}`,
  MAX_RATE_LIMIT_PER_MINUTE: String(HUGE_LIMIT),
  PRO_PLAN_AGENT_LIMIT: String(Math.max(100, CONVERSATIONS)),
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  HOST: '127.0.0.1',
};

let messagesSent = 0; // every text new, so none is answered as a duplicate
let clockSkewMs = 0; // the furthest a message's ts fell outside its request's span

function expect(condition: unknown, what: string, answer: unknown): asserts condition {
  if (!condition) throw new Error(`${what}: ${JSON.stringify(answer)}`);
}

/** Polls the transcript every POLL_MS, the first poll at a random point of the interval. */
async function poll(client: ApiClient, sessionId: string, messageTs: string): Promise<Learned> {
  // A poller's timer runs on its own; one started at each send would always find a 200 ms
  // reply at its first tick, a phase no real turn's varying length would keep.
  let next = nowMs() + Math.random() * POLL_MS;
  const deadline = nowMs() + TURN_TIMEOUT_MS;
  for (;;) {
    await sleep(Math.max(0, next - nowMs()));
    const page = await client.json('GET', `/sessions/${sessionId}/messages?after=${encodeURIComponent(messageTs)}`);
    expect(page.status === 200, 'poll', page.body);
    const learned = agentTurnOf(page);
    if (learned) return learned;
    if (nowMs() > deadline) throw new Error(`no reply polled in ${sessionId} after ${messageTs}`);
    next += POLL_MS;
  }
}

/** One message of `conversation`, and how long after its reply's commit the client knew of it. */
async function turn(client: ApiClient, conversation: Conversation, mode: Mode, streamed: StreamedReplies): Promise<Sample> {
  const n = messagesSent++;
  const body = { text: `!sleep ${SLEEP_MS} m${n}`, ...(conversation.sessionId ? { session_id: conversation.sessionId } : { agent_id: conversation.agentId }) };
  const expected = `You said: m${n}`;
  const sentMs = nowMs();
  const sent = await client.json('POST', '/messages', body, mode === 'wait' ? {} : { prefer: 'wait=0' });
  expect(typeof sent.body.message_ts === 'string', 'send', sent.body);
  const messageMs = tsMs(sent.body.message_ts);
  clockSkewMs = Math.max(clockSkewMs, sentMs - messageMs, messageMs - sent.receivedMs);
  conversation.sessionId = sent.body.session_id;
  let learned: Learned;
  if (mode === 'wait') {
    expect(sent.status === 200 && sent.body.status === 'completed', 'send-and-wait', sent.body);
    learned = { text: sent.body.reply, ts: sent.body.reply_ts, error: sent.body.error, receivedMs: sent.receivedMs };
  } else {
    expect(sent.status === 202 && ['processing', 'queued'].includes(sent.body.status), 'send with Prefer: wait=0', sent.body);
    const sessionId = sent.body.session_id as string;
    learned = mode === 'poll' ? await poll(client, sessionId, sent.body.message_ts)
      : mode === 'longpoll' ? await longPoll(client, sessionId, sent.body.message_ts, LONG_POLL_SECONDS, TURN_TIMEOUT_MS)
        : await streamed.next(sessionId, sent.body.message_ts);
  }
  expect(learned.text === expected && learned.error === undefined, `the reply to m${n}`, learned);
  const replyMs = tsMs(learned.ts);
  return { sentMs, latencyMs: learned.receivedMs - replyMs, sendMs: sent.receivedMs - sentMs, turnMs: replyMs - messageMs };
}

/**
 * Every conversation loops on `mode` for warm-up plus measure seconds (starts spread over a poll
 * interval, so the turns do not march in step); what was sent in the measured window is counted.
 * The loops then finish their last turn; null when nothing is measured (a warm-up).
 */
async function runMode(origin: string, client: ApiClient, conversations: Conversation[], mode: Mode, warmupSeconds: number, measureSeconds: number): Promise<ModeResult | null> {
  const streamed = new StreamedReplies(TURN_TIMEOUT_MS);
  const closers: Array<() => void> = [];
  let streamFailure: Error | undefined;
  if (mode === 'sse') {
    for (let index = 0; index < STREAMS; index++) {
      const serves = new Set(conversations.filter((c) => c.stream === index).map((c) => c.sessionId));
      closers.push(await client.stream('/events', (event) => { if (serves.has(event.event.session_id)) streamed.take(event); }, (error) => { streamFailure = error; }));
    }
  }
  const pid = serverPid(origin)!;
  const snapshot = () => ({ atMs: nowMs(), cpuUs: cpuMicros(pid), requests: client.requests, serverWaitMs: runQueueWaitMs(pid), clientWaitMs: runQueueWaitMs(process.pid) });
  let window: ReturnType<typeof snapshot> | undefined;
  let end: ReturnType<typeof snapshot> | undefined;
  const startTimer = setTimeout(() => { window = snapshot(); }, warmupSeconds * 1000);
  const endTimer = setTimeout(() => { end = snapshot(); }, (warmupSeconds + measureSeconds) * 1000);
  const samples: Sample[] = [];
  try {
    await Promise.all(conversations.map(async (conversation) => {
      await sleep(Math.random() * POLL_MS);
      do { // at least one turn each: a warm-up also gives every conversation its session
        if (streamFailure) throw streamFailure;
        samples.push(await turn(client, conversation, mode, streamed));
      } while (!end);
    }));
  } finally {
    clearTimeout(startTimer);
    clearTimeout(endTimer);
    for (const close of closers) close();
  }
  if (measureSeconds === 0 || !window || !end) return null;
  const measured = samples.filter((s) => s.sentMs >= window!.atMs && s.sentMs < end!.atMs);
  const seconds = (end.atMs - window.atMs) / 1000;
  return {
    samples: measured, turns: measured.length, seconds,
    cpuUsPerTurn: (end.cpuUs - window.cpuUs) / measured.length, requests: end.requests - window.requests,
    serverWaitMs: (end.serverWaitMs - window.serverWaitMs) / seconds, clientWaitMs: (end.clientWaitMs - window.clientWaitMs) / seconds,
  };
}

/** A new server process: warmed with send-and-wait, then every mode measured in `order`. */
async function round(token: string, conversations: Conversation[], order: readonly Mode[]): Promise<Record<Mode, ModeResult>> {
  const origin = await startServer([...SERVER_FLAGS, CLI, 'serve'], env, '/readyz');
  const client = new ApiClient(origin, API, token);
  try {
    if (conversations.length === 0) {
      for (let i = 0; i < CONVERSATIONS; i++) {
        const created = await client.json('POST', '/agents', { agent_name: `Push ${i}` });
        expect(created.status === 201, 'create agent', created.body);
        conversations.push({ agentId: created.body.agent_id, stream: i % STREAMS });
      }
    }
    await runMode(origin, client, conversations, 'wait', WARMUP_SECONDS, 0);
    const results = {} as Record<Mode, ModeResult>;
    for (const mode of order) {
      const result = (await runMode(origin, client, conversations, mode, MODE_WARMUP_SECONDS, MODE_SECONDS))!;
      results[mode] = result;
      const p = (pick: (s: Sample) => number, q: number) => percentile(result.samples.map(pick).sort((a, b) => a - b), q).toFixed(1);
      console.log(`  ${mode.padEnd(8)} ${result.turns} turns, ${(result.turns / result.seconds).toFixed(0)}/s, learned p50 ${p((s) => s.latencyMs, 0.5)} ms p99 ${p((s) => s.latencyMs, 0.99)} ms, `
        + `${result.cpuUsPerTurn.toFixed(0)} µs CPU a turn, ${(result.requests / result.turns).toFixed(2)} requests a turn; send p50 ${p((s) => s.sendMs, 0.5)} ms, `
        + `message→reply p50 ${p((s) => s.turnMs, 0.5)} ms; waiting for a core: server ${result.serverWaitMs.toFixed(0)} ms/s, bench ${result.clientWaitMs.toFixed(0)} ms/s`);
    }
    return results;
  } finally {
    client.close();
    await stopServer(origin);
  }
}

let failed = false;
try {
  const { token } = seedAccount(env, 0);
  const conversations: Conversation[] = [];
  console.log(`${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; ${DATABASE}; ${CONVERSATIONS} conversations on as many agents, `
    + `!sleep ${SLEEP_MS}; ${ROUNDS} rounds, each on a new server process warmed ${WARMUP_SECONDS} s, then each mode warmed ${MODE_WARMUP_SECONDS} s and measured ${MODE_SECONDS} s`);
  const rounds: Array<Record<Mode, ModeResult>> = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const order = r % 2 === 1 ? MODES : [...MODES].reverse();
    console.log(`round ${r}: ${order.join(', ')} (load average ${loadAverage()})`);
    rounds.push(await round(token, conversations, order));
  }
  if (clockSkewMs > CLOCK_TOLERANCE_MS) throw new Error(`a message's ts fell ${clockSkewMs.toFixed(3)} ms outside its request: the server's clock and ours disagree`);
  report(rounds);
  console.log(`load average at the end: ${loadAverage()}`);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await stopChildren();
  rmSync(dir, { recursive: true, force: true });
  if (DATABASE === 'postgres') {
    await dropPgSchemas(schema);
  }
}
process.exit(failed ? 1 : 0);

function report(rounds: Array<Record<Mode, ModeResult>>): void {
  const row = (mode: Mode) => {
    const of = (pick: (s: Sample) => number) => rounds.flatMap((r) => r[mode].samples.map(pick)).sort((a, b) => a - b);
    const latencies = of((s) => s.latencyMs);
    const turns = rounds.reduce((sum, r) => sum + r[mode].turns, 0);
    const requests = rounds.reduce((sum, r) => sum + r[mode].requests, 0);
    return {
      p50: percentile(latencies, 0.5), p95: percentile(latencies, 0.95), p99: percentile(latencies, 0.99), turns,
      turnsPerSecond: median(rounds.map((r) => r[mode].turns / r[mode].seconds)),
      requestsPerTurn: requests / turns,
      cpuUs: median(rounds.map((r) => r[mode].cpuUsPerTurn)),
      cpuRatio: median(rounds.map((r) => r[mode].cpuUsPerTurn / r.wait.cpuUsPerTurn)),
      sendP50: percentile(of((s) => s.sendMs), 0.5), turnP50: percentile(of((s) => s.turnMs), 0.5),
      serverWaitMs: median(rounds.map((r) => r[mode].serverWaitMs)), clientWaitMs: median(rounds.map((r) => r[mode].clientWaitMs)),
    };
  };
  const rows = Object.fromEntries(MODES.map((mode) => [mode, row(mode)])) as Record<Mode, ReturnType<typeof row>>;
  const ms = (value: number) => value.toFixed(value < 10 ? 2 : 1);
  console.log(`
| ${CONVERSATIONS} conversations, ${DATABASE}, ${ROUNDS} rounds × ${MODE_SECONDS} s | learned after commit p50 (ms) | p95 | p99 | turns measured | turns/s | requests a turn | server CPU a turn (µs) | CPU ÷ send-and-wait |
|---|---|---|---|---|---|---|---|---|
${MODES.map((mode) => {
    const r = rows[mode];
    return `| ${LABELS[mode]} | ${ms(r.p50)} | ${ms(r.p95)} | ${ms(r.p99)} | ${r.turns} | ${r.turnsPerSecond.toFixed(0)} | ${r.requestsPerTurn.toFixed(2)} | ${r.cpuUs.toFixed(0)} | ${r.cpuRatio.toFixed(2)}× |`;
  }).join('\n')}

| what else was seen (medians) | POST answered (ms) | message ts → reply ts (ms) | server's main thread waiting for a core (ms a second) | the bench's main thread waiting for a core (ms a second) |
|---|---|---|---|---|
${MODES.map((mode) => { const r = rows[mode]; return `| ${mode} | ${ms(r.sendP50)} | ${ms(r.turnP50)} | ${r.serverWaitMs.toFixed(0)} | ${r.clientWaitMs.toFixed(0)} |`; }).join('\n')}

(latencies pooled over the rounds; turns/s, CPU and its ratio: medians of the rounds; a message's ts fell at most ${Math.max(0, clockSkewMs).toFixed(3)} ms outside its request)
targets: ${targets(rows).join('; ')}`);
}

/** Issue 24's targets, for the modes measured: push learns within 5 ms at the median for at most 1.2× the CPU; 250 ms polling takes 100 ms or more. */
function targets(rows: Partial<Record<Mode, { p50: number; cpuRatio: number }>>): string[] {
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  return [
    ...(['longpoll', 'sse'] as const).flatMap((mode) => {
      const row = rows[mode];
      return row ? [`${mode} p50 ≤ 5 ms ${verdict(row.p50 <= 5)}, CPU ≤ 1.2× send-and-wait ${verdict(row.cpuRatio <= 1.2)}`] : [];
    }),
    ...(rows.poll ? [`poll p50 ≥ 100 ms ${verdict(rows.poll.p50 >= 100)}`] : []),
  ];
}

/** The machine's load averages (1, 5, 15 minutes): other work sharing the cores shows here. */
function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return 'unknown';
  }
}
