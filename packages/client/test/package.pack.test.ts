import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { seededDatabase, TEST_DB } from '../../../src/testing/harness.ts';
import { startServerProcess, type ServerProcess } from '../../../src/testing/server-process.ts';

/**
 * The package as a user gets it: built, packed with `npm pack`, installed from the tarball into
 * a fresh project outside this workspace, and used there against the real server, on this Node
 * (24) and on the system's Node 20 when there is one.
 */
const PACKAGE_DIR = join(import.meta.dirname, '..');
const SYSTEM_NODE = '/usr/bin/node';
describe('the packed package', { skip: TEST_DB === 'postgres' && 'the package, not the database, is under test' }, () => {
  const seeded = seededDatabase('client-pack@example.test', 1);
  let project: string;
  let server: ServerProcess;

  before(async () => {
    execFileSync(process.execPath, [join(PACKAGE_DIR, '..', '..', 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(PACKAGE_DIR, 'tsconfig.build.json')]);
    project = mkdtempSync(join(tmpdir(), 'agent-channel-client-user-'));
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', project], { cwd: PACKAGE_DIR, encoding: 'utf8' });
    const tarball = join(project, (JSON.parse(packed) as { filename: string }[])[0]!.filename);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'a-user-project', private: true, type: 'module' }));
    execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: project, encoding: 'utf8' });
    server = await startServerProcess(seeded.env, 60_000);
  }, { timeout: 180_000 });
  after(async () => {
    await server?.kill('SIGTERM');
    if (project) rmSync(project, { recursive: true, force: true });
  });

  const USE = `
  import { AgentChannel, ApiError } from '@agent-channel/client';
  const client = new AgentChannel({ baseUrl: process.env.URL, apiKey: process.env.KEY });
  const reply = await client.sendAndWait('!sleep 1500 hello from ' + process.version);
  const agents = await client.agents.list();
  let problem;
  try { await client.transcript('ses_nope').next(); } catch (error) { problem = error instanceof ApiError ? error.code : String(error); }
  const later = setTimeout(() => client.send('again', { sessionId: reply.session_id }), 500);
  let streamed;
  for await (const event of client.events({ sessionId: reply.session_id })) { streamed = event.data.text; break; }
  clearTimeout(later);
  console.log(JSON.stringify({ reply: reply.reply, agents: agents.length, problem, streamed }));
  `;

  function useIn(node: string) {
    writeFileSync(join(project, 'use.mjs'), USE);
    const run = spawnSync(node, ['use.mjs'], { cwd: project, encoding: 'utf8', env: { ...process.env, URL: server.url, KEY: seeded.key }, timeout: 60_000 });
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout) as { reply: string; agents: number; problem: string; streamed: string };
  }

  test('the tarball holds the built library and CLI, no sources or tests; the library imports nothing but openapi-fetch', () => {
    const installed = join(project, 'node_modules', '@agent-channel', 'client');
    assert.ok(existsSync(join(installed, 'dist', 'index.js')) && existsSync(join(installed, 'dist', 'index.d.ts')));
    assert.ok(!existsSync(join(installed, 'src')) && !existsSync(join(installed, 'test')));
    const library = readdirSync(join(installed, 'dist'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.js') && !file.startsWith('cli/'));
    const imported = new Set(library.flatMap((file) => [...readFileSync(join(installed, 'dist', file), 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]!))
      .filter((name) => !name.startsWith('.')));
    assert.deepEqual([...imported], ['openapi-fetch'], 'no node: module, nothing else: it runs in browsers, Deno and Bun');
  });

  test('installed from the tarball, it works against the real server on Node 24', () => {
    const used = useIn(process.execPath);
    assert.deepEqual(used, { reply: `You said: hello from ${process.version}`, agents: 1, problem: 'session_not_found', streamed: 'You said: again' });
  });

  test('… and on the system\'s Node 20', { skip: !existsSync(SYSTEM_NODE) && 'no system Node' }, () => {
    const version = execFileSync(SYSTEM_NODE, ['--version'], { encoding: 'utf8' }).trim();
    const used = useIn(SYSTEM_NODE);
    assert.equal(used.reply, `You said: hello from ${version}`);
    assert.equal(used.problem, 'session_not_found');
    assert.equal(used.streamed, 'You said: again');
  });
});
