import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { childEnv, databaseEnv, freshDatabase } from './testing/harness.ts';

/**
 * The README's "Try it in a minute" block, run as written by bash in the checkout's root: the
 * first thing a newcomer types, so a renamed flag or a changed answer must fail here. Only three
 * things differ from a newcomer's run: `npm ci` is skipped (this checkout is installed), the
 * port is a free one instead of 8080, and the database is the test pass's own.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The first `sh` block after a heading. */
function shellBlockAfter(heading: string): string {
  const section = README.slice(README.indexOf(`\n## ${heading}\n`));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  assert.ok(block, `README: no sh block under "${heading}"`);
  return block[1]!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Each line the block shows as a comment of an answer (`# {…}`), as a pattern: `…` stands for any text. */
function shownAnswers(block: string): RegExp[] {
  return [...block.matchAll(/^# (\{.*\})$/gm)].map(([, shown]) =>
    new RegExp(`^${shown!.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^"]+')}$`));
}

test('the README\'s quick start runs as written and answers as it shows', { timeout: 90_000 }, async () => {
  const block = shellBlockAfter('Try it in a minute');
  assert.match(block, /^npm ci\n/, 'the block starts by installing');
  const port = await freePort();
  const script = block.replace(/^npm ci\n/, '').replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`);
  assert.ok(!script.includes(':8080'), 'every address in the block was moved to the free port');
  const database = await freshDatabase();
  // Its own process group, so that the server it starts in the background (npm start &) goes too.
  const shell = spawn('bash', ['-euo', 'pipefail', '-c', `${script}\necho`], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...childEnv(), ...databaseEnv(database), PORT: String(port), HOST: '127.0.0.1', SCRYPT_COST_LOG2: '10', LOG_LEVEL: 'warn' },
  });
  let stdout = '';
  let stderr = '';
  shell.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString(); });
  shell.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString(); });
  const stopAll = (signal: NodeJS.Signals) => { try { process.kill(-shell.pid!, signal); } catch { /* already gone */ } };
  // A block that never ends (a server that never listens: the until-loop) fails, and stops.
  const stuck = setTimeout(() => stopAll('SIGKILL'), 60_000);
  const code = await new Promise<number | null>((resolve) => shell.once('exit', resolve));
  clearTimeout(stuck);
  stopAll('SIGTERM');
  try {
    assert.equal(code, 0, `the block failed:\n${stderr}`);
    // What it prints, past npm's banner for `npm start` (its "> …" lines): the user id and the
    // agent id on lines of their own, then the two curl answers, which end with no newline: the
    // agent list, then the message's answer.
    const [userId, agentId, answers, ...more] = stdout.split('\n').filter((line) => line !== '' && !line.startsWith('> '));
    assert.deepEqual(more, []);
    assert.match(userId!, /^usr_[A-Za-z0-9]+$/);
    assert.match(agentId!, /^agt_[A-Za-z0-9]+$/);
    const split = answers!.indexOf('}{') + 1;
    const agents = JSON.parse(answers!.slice(0, split)) as { agents: Array<{ agent_id: string; name: string }> };
    assert.deepEqual(agents.agents.map(({ agent_id, name }) => ({ agent_id, name })), [{ agent_id: agentId, name: 'Helper' }]);
    const answer = answers!.slice(split);
    const [shown] = shownAnswers(block);
    assert.ok(shown, 'the block shows the answer it expects');
    assert.match(answer, shown);
    assert.equal(JSON.parse(answer).agent_id, agentId);
  } finally {
    await database.drop();
  }
});
