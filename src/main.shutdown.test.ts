import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { openStore } from './store/store.ts';
import { proxyInFrontOf } from './testing/frozen-database.ts';
import { API, childEnv, seededDatabase, TEST_DB } from './testing/harness.ts';
import { postMessage, startServerProcess, type ServerProcess } from './testing/server-process.ts';

/**
 * Graceful shutdown as a client on a kept-alive connection sees it: a request under way when
 * SIGTERM comes is answered; one that arrives after it, on the same connection, is refused with
 * the contract's problem body (not Fastify's own JSON), and the connection is closed.
 */
const seeded = seededDatabase('shutdown@example.test', 1, { SHUTDOWN_GRACE_MS: '5000' });

/** Opens a kept-alive connection to the server and sends a message on it; what comes back is collected. */
async function sendOnOpenConnection(server: ServerProcess, text: string) {
  const { port } = new URL(server.url);
  const socket = connect(Number(port), '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => { received += chunk; });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const body = JSON.stringify({ text, agent_id: seeded.agentIds[0] });
  socket.write(`POST ${API}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${seeded.key}\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return { socket, closed, received: () => received };
}

/**
 * Resolves once the turn of this message runs: a signal sent after a guessed pause instead could
 * come, on a loaded machine, before the server had even taken the request.
 */
async function untilItsTurnRuns(text: string): Promise<void> {
  const store = await openStore(seeded.database.url, seeded.database.pgSchema ? { pgSchema: seeded.database.pgSchema } : {});
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const running = await store.db.selectFrom('jobs').innerJoin('turns', 'turns.id', 'jobs.user_turn_id').select('jobs.id')
        .where('turns.text', '=', text).where('jobs.status', '=', 'running').executeTakeFirst();
      if (running) return;
      assert.ok(Date.now() < deadline, `the turn of "${text}" never started`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await store.close();
  }
}

test('SIGTERM: a request arriving on an open connection gets a 503 problem and the connection closes; the one under way is answered', { timeout: 60_000 }, async () => {
  const server = await startServerProcess(seeded.env);
  const { socket, received: answers, closed } = await sendOnOpenConnection(server, '!sleep 1500 under way');
  try {
    await untilItsTurnRuns('!sleep 1500 under way');
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200)); // the server is closing
    socket.write(`GET ${API}/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${seeded.key}\r\n\r\n`);
    await closed;
  } finally {
    socket.destroy();
    await server.kill('SIGKILL');
  }

  const received = answers();
  const [first, second] = received.split(/(?=HTTP\/1\.1 \d{3} )/);
  assert.match(first ?? '', /^HTTP\/1\.1 200 /, received);
  assert.match(first!, /"reply":"You said: under way"/);
  assert.match(second ?? '', /^HTTP\/1\.1 503 /, received);
  assert.match(second!, /^content-type: application\/problem\+json/im);
  assert.match(second!, /^connection: close/im);
  const problem = JSON.parse(second!.slice(second!.indexOf('\r\n\r\n') + 4)) as { code: string; status: number };
  assert.equal(problem.code, 'service_unavailable');
  assert.equal(problem.status, 503);
});

test('SIGTERM: a kept-alive connection whose request was under way is closed once answered, so the exit does not wait for its keep-alive timeout', { timeout: 60_000 }, async () => {
  const server = await startServerProcess(seeded.env);
  const exited = new Promise<void>((resolve) => server.child.once('exit', () => resolve()));
  const { socket, received: answers, closed } = await sendOnOpenConnection(server, '!sleep 800 kept alive');
  try {
    await untilItsTurnRuns('!sleep 800 kept alive');
    const signalled = Date.now();
    server.child.kill('SIGTERM');
    // The client sends nothing more and keeps the connection open: only the server can end it.
    await closed;
    await exited;
    const received = answers();
    const tookMs = Date.now() - signalled;
    assert.match(received, /^HTTP\/1\.1 200 [\s\S]*"reply":"You said: kept alive"/, received);
    assert.ok(tookMs < 10_000, `the server exited ${tookMs} ms after SIGTERM (its keep-alive timeout is 72 s)`);
  } finally {
    socket.destroy();
    await server.kill('SIGKILL');
  }
});

test('SIGHUP (the terminal of a foreground server closing) shuts down as SIGTERM does: a waiting request is answered 202, exit 0', { timeout: 60_000 }, async () => {
  const server = await startServerProcess({ ...seeded.env, SHUTDOWN_GRACE_MS: '300' });
  try {
    const waiting = postMessage(server, seeded.key, { text: '!sleep 5000 cut off by the hang-up', agent_id: seeded.agentIds[0] });
    await untilItsTurnRuns('!sleep 5000 cut off by the hang-up');
    server.child.kill('SIGHUP');
    const answer = await waiting;
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    assert.equal(answer.body.status, 'queued', 'the turn went back to the head of its line');
    const exit = await server.exited;
    assert.deepEqual(exit, { code: 0, signal: null }, server.output());
    assert.match(server.output(), /"signal":"SIGHUP"[^\n]*"msg":"shutting down"/);
  } finally {
    await server.kill('SIGKILL');
  }
});

test('SIGTERM while the database has frozen (it holds its connections and never answers): the process still exits, 10 s after the grace period, saying why', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only', timeout: 90_000 }, async () => {
  const { proxy, url } = await proxyInFrontOf(seeded.env.DATABASE_URL!);
  const server = await startServerProcess({ ...seeded.env, DATABASE_URL: url, SHUTDOWN_GRACE_MS: '1000' });
  const agents = () => fetch(`${server.url}${API}/agents`, { headers: { authorization: `Bearer ${seeded.key}` } });
  try {
    assert.equal((await agents()).status, 200);
    proxy.freeze();
    const stuck = agents().catch((error: unknown) => error); // waits on the database
    await new Promise((resolve) => setTimeout(resolve, 300));
    server.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      server.exited, new Promise((resolve) => { timer = setTimeout(() => resolve('still running 30 s after SIGTERM'), 30_000); })]);
    clearTimeout(timer);
    assert.deepEqual(exit, { code: 1, signal: null }, server.output());
    assert.match(server.output(), /"level":50[^\n]*"msg":"shutdown did not finish by SHUTDOWN_GRACE_MS \+ 10 s \(is the database answering\?\): exiting anyway"/);
    await stuck;
  } finally {
    await server.kill('SIGKILL');
    proxy.thaw();
    await proxy.close();
  }
});

test('npm start: a SIGTERM sent to npm alone (a supervisor, docker stop) reaches the server, which shuts down in order instead of running on orphaned', { skip: TEST_DB !== 'sqlite' && 'one pass is enough', timeout: 60_000 }, async () => {
  const npm = spawn('npm', ['start'], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    env: { ...childEnv(), ...seeded.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  for (const stream of [npm.stdout!, npm.stderr!]) stream.setEncoding('utf8').on('data', (chunk: string) => { output += chunk; });
  const npmExited = new Promise((resolve) => npm.once('exit', resolve));
  let serverPid: number | undefined;
  try {
    while (!/Server listening at/.test(output)) {
      assert.equal(npm.exitCode, null, output);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    serverPid = Number(/"pid":(\d+)[^\n]*Server listening at/.exec(output)![1]);
    npm.kill('SIGTERM');
    await npmExited;
    const deadline = Date.now() + 15_000;
    while (isRunning(serverPid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(isRunning(serverPid), false, `the server (pid ${serverPid}) still runs after npm took SIGTERM:\n${output}`);
    assert.match(output, /"signal":"SIGTERM"[^\n]*"msg":"shutting down"/);
  } finally {
    npm.kill('SIGKILL');
    if (serverPid && isRunning(serverPid)) process.kill(serverPid, 'SIGKILL');
  }
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
