import assert from 'node:assert/strict';
import { test } from 'node:test';
import { proxyInFrontOf } from './testing/frozen-database.ts';
import { seededDatabase, TEST_DB } from './testing/harness.ts';
import { postMessage, startServerProcess, transcriptFrom } from './testing/server-process.ts';

/**
 * The server's own log while its database is away for a moment, as an operator who alerts on
 * error lines reads it: what heals by itself (a turn's outcome written once the database is back)
 * is a warning naming the database, never an error with a stack.
 */
const seeded = seededDatabase('outage-log@example.test', 1);

test('PostgreSQL away for two seconds under a running turn: warnings that name the database, no error line, and the reply lands once', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only', timeout: 60_000 }, async () => {
  const { proxy, url } = await proxyInFrontOf(seeded.env.DATABASE_URL!);
  const server = await startServerProcess({ ...seeded.env, DATABASE_URL: url });
  try {
    const sent = await postMessage(server, seeded.key, { text: '!sleep 800 through the outage', agent_id: seeded.agentIds[0] }, { prefer: 'wait=0' });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    proxy.cut(); // the turn ends while the database is away: its outcome waits for it
    await new Promise((resolve) => setTimeout(resolve, 2000));
    proxy.restore();

    const deadline = Date.now() + 20_000;
    let page;
    for (;;) {
      page = await transcriptFrom(server, seeded.key, sent.body.session_id as string).catch(() => undefined);
      if (page?.status === 'idle' && page.messages.length >= 2) break;
      assert.ok(Date.now() < deadline, `no reply in time: ${JSON.stringify(page)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(page.messages.map((m: { text: string }) => m.text).slice(1), ['You said: through the outage']);

    const lines = server.output().split('\n').filter((line) => line.startsWith('{'));
    const warnings = lines.filter((line) => /"level":40[^\n]*"msg":"database unavailable"/.test(line));
    assert.ok(warnings.some((line) => /"during":"writing the outcome of job \d+/.test(line)), server.output());
    for (const line of warnings) assert.ok(!line.includes('"stack"'), line);
    assert.deepEqual(lines.filter((line) => /"level":(50|60)/.test(line)), [], 'no error line for what healed by itself');
  } finally {
    await server.kill('SIGKILL');
    await proxy.close();
  }
});
