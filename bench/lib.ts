/** Shared pieces of the benchmarks: child servers on free loopback ports, load rounds, medians. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { API_PREFIX } from '../src/channels/api-prefix.ts';

/** The PostgreSQL the benchmarks use (BENCH_PG_URL), each run in a schema of its own. */
export const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Drops a run's PostgreSQL schemas, with whatever it wrote. */
export async function dropPgSchemas(...schemas: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`drop schema if exists ${schema} cascade`);
  } finally {
    await client.end();
  }
}

export const CLI = join(import.meta.dirname, '..', 'bin', 'agent-channel.js');

/** Runs the CLI at `cliPath` (this tree's, or another revision's) and returns what it printed. */
export function cliOf(cliPath: string, env: NodeJS.ProcessEnv, ...args: string[]): string {
  const result = spawnSync(process.execPath, [cliPath, ...args], { env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`agent-channel ${args.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
}

/** A key's per-minute limit (and the server's MAX_RATE_LIMIT_PER_MINUTE) that never binds in a benchmark. */
export const HUGE_LIMIT = 50_000_000;

/**
 * With the real CLI (this tree's, or `cliPath`'s): a pro user with `agents` agents and a key
 * whose limit never binds, so the limiter is consulted on every request but never refuses.
 */
export function seedAccount(env: NodeJS.ProcessEnv, agents: number, cliPath = CLI): { agentIds: string[]; token: string } {
  const run = (...args: string[]) => cliOf(cliPath, env, ...args);
  const email = 'bench@example.test';
  run('users', 'create', '--email', email, '--password', 'bench-password', '--plan', 'pro');
  const agentIds = Array.from({ length: agents }, (_, i) => run('agents', 'create', '--email', email, '--name', `Bench ${i}`));
  const token = run('keys', 'create', '--email', email, '--label', 'bench', '--rate-limit', String(HUGE_LIMIT));
  return { agentIds, token };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    }).on('error', reject);
  });
}

export const children: ChildProcess[] = [];
// The process behind each started server's origin, so a load can be charged to it.
const pidByOrigin = new Map<string, number>();

/** CPU time (user + system, all threads) a process has used, in microseconds; Linux only, else NaN. */
export function cpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks of 10 ms
  } catch {
    return Number.NaN;
  }
}

/**
 * The CPU time of every PostgreSQL process on this machine (its backends, WAL writer and
 * checkpointer), in µs: what the database spends is charged to the turns beside the server's.
 * True only where PostgreSQL serves nothing else meanwhile; a process that ends within the
 * window (an autovacuum worker) takes its time with it.
 */
export function postgresCpuMicros(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.includes('(postgres)')) total += cpuMicros(Number(entry));
    } catch {
      // gone between the listing and the read
    }
  }
  return total;
}

/**
 * A TCP relay on 127.0.0.1 to `target` that holds every chunk `oneWayMs` in each direction, in
 * order: a database across a network (a round trip costs twice `oneWayMs`) without leaving loopback.
 */
export async function delayingRelay(target: { host: string; port: number }, oneWayMs: number): Promise<{ port: number; close(): void }> {
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket) => {
    // Timers of one length fire in the order they were set: the chunks keep theirs.
    from.on('data', (chunk: Buffer) => setTimeout(() => { if (!to.destroyed) to.write(chunk); }, oneWayMs));
    from.on('close', () => setTimeout(() => to.destroy(), oneWayMs));
    from.on('error', () => to.destroy());
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true); // as pg's and PostgreSQL's own sockets: Nagle would hold a second chunk for an ACK
      socket.on('close', () => sockets.delete(socket));
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** The process of the server started at `origin`. */
export function serverPid(origin: string): number | undefined {
  return pidByOrigin.get(origin);
}

/**
 * How long a process's main thread has waited, runnable, for a core, in ms (Linux schedstat;
 * NaN elsewhere): the machine's contention as that thread felt it.
 */
export function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** Starts a server child on a free loopback port and waits until `readyPath` answers. */
export async function startServer(args: string[], env: NodeJS.ProcessEnv, readyPath: string): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, args, { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  pidByOrigin.set(base, child.pid!);
  // Up to a minute: a busy machine (other work on the cores) starts a server slowly.
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    try {
      if ((await fetch(base + readyPath)).status < 500) return base;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${args.join(' ')} did not start`);
}

export async function stopChildren(): Promise<void> {
  await Promise.all(children.splice(0).map(stopChild));
}

function stopChild(child: ChildProcess): Promise<unknown> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(null);
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/** Stops the server started at `origin` (and forgets it). */
export async function stopServer(origin: string): Promise<void> {
  const pid = pidByOrigin.get(origin);
  pidByOrigin.delete(origin);
  const index = children.findIndex((child) => child.pid === pid);
  if (index >= 0) await stopChild(children.splice(index, 1)[0]!);
}

/**
 * One round's load on a server process of its own: started, warmed for `warmupSeconds`, loaded
 * by `run`, stopped. A server process keeps the speed it happens to settle into (JIT, where the
 * scheduler puts its threads) for its whole life, and that differs by up to a third between
 * processes of the same code on this machine: rounds on one process would all share its luck,
 * so every round gets new ones and the medians are over processes.
 */
export function roundOnFreshServer(
  args: string[], env: NodeJS.ProcessEnv, readyPath: string, warmupSeconds: number, run: (origin: string, seconds: number) => Promise<RoundResult>,
): (seconds: number) => Promise<RoundResult> {
  return async (seconds) => {
    const origin = await startServer(args, env, readyPath);
    try {
      if (warmupSeconds > 0) await run(origin, warmupSeconds);
      return await run(origin, seconds);
    } finally {
      await stopServer(origin);
    }
  };
}

/**
 * A load's result; any non-2xx answer (or connection error) fails the load instead. `cpuUs`: the
 * server's CPU time per request in the round (its own work, not the load generator's).
 */
export interface RoundResult { rps: number; p50: number; p99: number; non2xx: number; cpuUs: number }

export async function load(options: autocannon.Options): Promise<RoundResult> {
  const pid = pidByOrigin.get(new URL(options.url).origin);
  const cpuBefore = pid === undefined ? Number.NaN : cpuMicros(pid);
  const result = await autocannon(options);
  const cpuUs = pid === undefined ? Number.NaN : (cpuMicros(pid) - cpuBefore) / result.requests.total;
  if (result.errors > 0) throw new Error(`${options.url}: ${result.errors} errors`);
  if (result.non2xx > 0) throw new Error(`${options.url}: ${result.non2xx} non-2xx answers`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, cpuUs };
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

export interface Pair { ours: RoundResult; bare: RoundResult }

/**
 * Rounds alternating which server goes first, so neither always runs on a warmer (or noisier)
 * machine; logs each round with `unit` (req/s, turns/s) and the names of the two sides.
 */
export async function alternatingRounds(
  rounds: number, runOurs: () => Promise<RoundResult>, runBare: () => Promise<RoundResult>, unit = 'req/s',
  names: { ours: string; bare: string } = { ours: 'ours', bare: 'bare' },
): Promise<Pair[]> {
  const results: Pair[] = [];
  const describe = (r: RoundResult, what: string) => `${r.rps.toFixed(0)} ${what} (p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.cpuUs.toFixed(0)} µs CPU each)`;
  for (let round = 1; round <= rounds; round++) {
    const oursFirst = round % 2 === 1;
    const first = oursFirst ? await runOurs() : await runBare();
    const second = oursFirst ? await runBare() : await runOurs();
    const pair = oursFirst ? { ours: first, bare: second } : { ours: second, bare: first };
    results.push(pair);
    console.log(`round ${round}: ${names.ours} ${describe(pair.ours, unit)} | ${names.bare} ${describe(pair.bare, 'req/s')} | ratio ${(pair.ours.rps / pair.bare.rps * 100).toFixed(1)}%`);
  }
  return results;
}

/** Medians over rounds, and the medians of the per-round throughput and CPU ratios. */
export function summarize(pairs: Pair[]) {
  const of = (side: 'ours' | 'bare') => ({
    rps: median(pairs.map((p) => p[side].rps)), p50: median(pairs.map((p) => p[side].p50)), p99: median(pairs.map((p) => p[side].p99)),
    cpuUs: median(pairs.map((p) => p[side].cpuUs)),
  });
  return {
    ours: of('ours'), bare: of('bare'),
    ratio: median(pairs.map((p) => p.ours.rps / p.bare.rps)),
    cpuRatio: median(pairs.map((p) => p.ours.cpuUs / p.bare.cpuUs)),
  };
}

export { API_PREFIX as API };

/**
 * Every text a message benchmark sends in this process is new: a counter shared by all loads.
 * (Until 2026-11-28 each load started again at "hello 0", so after a warm-up most of a round's
 * messages repeated one sent seconds before and were answered as duplicates, not turns.)
 */
let messagesSent = 0;
let answersNotCompleted = 0;

/** POST /messages requests for autocannon: every one a fresh text, spread over the agents in turn; each answer must be a completed turn. */
export function messageRequests(agentIds: string[]) {
  return [{
    method: 'POST' as const,
    path: `${API_PREFIX}/messages`,
    setupRequest: (request: any) => {
      const n = messagesSent++;
      request.body = JSON.stringify({ text: `hello ${n}`, agent_id: agentIds[n % agentIds.length] });
      return request;
    },
    // A 202 (processing, queued) or a duplicate is no completed turn; any other status fails the load itself.
    onResponse: (_status: number, body: string) => {
      if (!body.includes('"status":"completed"')) answersNotCompleted++;
    },
  }];
}

/** Fails the benchmark if any message was answered with something other than a completed turn (a duplicate, say). */
export function assertEveryMessageCompleted(): void {
  if (answersNotCompleted > 0) throw new Error(`${answersNotCompleted} messages were answered without a completed turn: the figures would not be turns`);
}
