/**
 * A/B: this tree against another revision, loaded in short slices that alternate which goes
 * first, each slice on new server processes (a process keeps its own luck, up to a third either
 * way, for its whole life). On a machine whose speed swings by tens of percent from one
 * minute to the next, two benchmark runs one after the other cannot show a 10 % change; slices
 * of a few seconds, side by side, can (an A/A run of this tool gives ratios within about 3 %).
 * SQLite by default, or DATABASE=postgres (a schema of its own for each server in the local
 * PostgreSQL, dropped after); loopback only; about a minute with the defaults.
 *
 *   BASE=HEAD~1 npm run bench:ab                        (POST /messages, 50 connections)
 *   BASE=f400781 ROUTE=agents SLICES=12 SLICE_SECONDS=3 npm run bench:ab
 *   BASE=f400781 WARMUP_SECONDS=45 npm run bench:ab      (each database grown by use first)
 *   BASE=HEAD~1 DATABASE=postgres npm run bench:ab
 *   BASE=HEAD~1 CONNECTIONS=1 npm run bench:ab           (one client: latency rather than throughput)
 *   BASE=HEAD~1 PROCESS_WARMUP_SECONDS=10 npm run bench:ab   (each slice's processes past V8's warm-up)
 *
 * The revision is checked out into a temporary git worktree that shares this tree's
 * node_modules, so it must have the same package-lock.json. Each server gets its own database,
 * made by its own tree's CLI (a revision may have fewer migrations).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  alternatingRounds, API, assertEveryMessageCompleted, dropPgSchemas, HUGE_LIMIT, load, messageRequests, PG_URL, roundOnFreshServer, seedAccount, startServer, stopChildren, stopServer, summarize, type RoundResult,
} from './lib.ts';

const BASE = process.env.BASE;
const ROUTE = process.env.ROUTE ?? 'messages';
const SLICES = Number(process.env.SLICES ?? 8);
const SLICE_SECONDS = Number(process.env.SLICE_SECONDS ?? 2);
// How much each database grows first: some costs show only on a database grown by use.
const WARMUP_SECONDS = Number(process.env.WARMUP_SECONDS ?? 2);
// Each slice runs on new server processes (see roundOnFreshServer), warmed this long first.
// (A short warm-up keeps slices many; both trees are measured as V8 still compiles. For a steady
// state, as the benchmarks measure it, give 6 s for GET /agents and 10 s for POST /messages.)
const PROCESS_WARMUP_SECONDS = Number(process.env.PROCESS_WARMUP_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? (ROUTE === 'agents' ? 10 : 50));
const DATABASE = process.env.DATABASE ?? 'sqlite';
const AGENTS = 50;
if (!BASE) throw new Error('Set BASE to the git revision to compare this tree with, e.g. BASE=HEAD~1');
if (ROUTE !== 'messages' && ROUTE !== 'agents') throw new Error('ROUTE is messages or agents');
if (DATABASE !== 'sqlite' && DATABASE !== 'postgres') throw new Error('DATABASE is sqlite or postgres');

const here = join(import.meta.dirname, '..');
const git = (...args: string[]) => {
  const result = spawnSync('git', args, { cwd: here, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`git ${args.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
};
const baseRevision = git('rev-parse', '--verify', `${BASE}^{commit}`);
if (git('show', `${baseRevision}:package-lock.json`) !== readFileSync(join(here, 'package-lock.json'), 'utf8').trim()) {
  throw new Error(`${BASE} has another package-lock.json: its dependencies would not be the ones it was written for`);
}

const dir = mkdtempSync(join(tmpdir(), 'agent-channel-ab-'));
const baseTree = join(dir, 'base');
const pgSchemas: string[] = [];

function databaseUrl(name: string): string {
  if (DATABASE === 'sqlite') return `sqlite:${join(dir, `${name}.db`)}`;
  const schema = `ab_${name}_${process.pid}`;
  pgSchemas.push(schema);
  return `${PG_URL}?schema=${schema}`;
}

/** A server of `tree` on a database of its own, with a pro user, its agents and a key that never hits its limit. */
async function serverOf(tree: string, name: string) {
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl(name),
    MAX_RATE_LIMIT_PER_MINUTE: String(HUGE_LIMIT),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    HOST: '127.0.0.1',
  };
  const cliPath = join(tree, 'bin', 'agent-channel.js');
  const { agentIds, token } = seedAccount(env, ROUTE === 'messages' ? AGENTS : 1, cliPath);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const run = (origin: string, seconds: number): Promise<RoundResult> => (ROUTE === 'messages'
    ? load({ url: origin, connections: CONNECTIONS, duration: seconds, headers, requests: messageRequests(agentIds) })
    : load({ url: `${origin}${API}/agents`, connections: CONNECTIONS, duration: seconds, headers }));
  // The database grows first, on a server of its own.
  const grower = await startServer([cliPath, 'serve'], env, '/readyz');
  await run(grower, WARMUP_SECONDS);
  await stopServer(grower);
  return roundOnFreshServer([cliPath, 'serve'], env, '/readyz', PROCESS_WARMUP_SECONDS, run);
}

try {
  git('worktree', 'add', '--detach', baseTree, baseRevision);
  symlinkSync(join(here, 'node_modules'), join(baseTree, 'node_modules'));
  const runBase = await serverOf(baseTree, 'base');
  const runThis = await serverOf(here, 'this');
  console.log(`${ROUTE === 'messages' ? 'POST /messages' : 'GET /agents'}, ${CONNECTIONS} connections, on ${DATABASE}; each database grown for ${WARMUP_SECONDS} s, then ${SLICES} slices of ${SLICE_SECONDS} s, each on new server processes warmed for ${PROCESS_WARMUP_SECONDS} s; base ${BASE} (${baseRevision.slice(0, 7)}) against this tree`);
  // "ours" is this tree and "bare" the base revision, in the shared helpers' words.
  const summary = summarize(await alternatingRounds(SLICES, () => runThis(SLICE_SECONDS), () => runBase(SLICE_SECONDS),
    'req/s', { ours: 'this', bare: 'base' }));
  assertEveryMessageCompleted(); // (nothing is counted for GET /agents)
  console.log(`
| medians over ${SLICES} slices | per second | p50 (ms) | p99 (ms) | server CPU per request (µs) |
|---|---|---|---|---|
| base ${BASE} (${baseRevision.slice(0, 7)}) | ${summary.bare.rps.toFixed(0)} | ${summary.bare.p50} | ${summary.bare.p99} | ${summary.bare.cpuUs.toFixed(1)} |
| this tree | ${summary.ours.rps.toFixed(0)} | ${summary.ours.p50} | ${summary.ours.p99} | ${summary.ours.cpuUs.toFixed(1)} |
| this ÷ base (median of per-slice ratios) | **${summary.ratio.toFixed(3)}×** | | | ${summary.cpuRatio.toFixed(3)}× |

machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}`);
} finally {
  await stopChildren();
  spawnSync('git', ['worktree', 'remove', '--force', baseTree], { cwd: here });
  rmSync(dir, { recursive: true, force: true });
  if (pgSchemas.length > 0) {
    await dropPgSchemas(...pgSchemas);
  }
}
