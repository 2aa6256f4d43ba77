import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { openStore } from '../store/store.ts';
import { seededDatabase, TEST_DB } from '../testing/harness.ts';
import { postMessage, startServerProcess, transcriptFrom, type ServerProcess } from '../testing/server-process.ts';

/**
 * Three real server processes share one PostgreSQL schema; the machines' clocks disagree by a
 * minute either way (each process's `Date` shifted, as on a machine whose clock is off). Leases
 * are written and compared by the database's clock, so no instance finds another's healthy turn
 * expired: each turn runs once, on the instance that took it. The duplicate window is judged by
 * that clock too.
 */

const LEASE_MS = 3000; // renewed every second, expiry looked for every 1.5 s
const SKEW_MS = 60_000;
// Long enough to outlast a third instance's start on a loaded machine: the message sent after it
// must still find the first agent busy.
const TURN_MS = 12_000;
const PRELOAD = fileURLToPath(new URL('../testing/skewed-clock.ts', import.meta.url));

describe('instances whose clocks are a minute apart', { skip: TEST_DB !== 'postgres' && 'PostgreSQL pass only' }, () => {
  const seeded = seededDatabase('clocks@example.test', 2, { WAIT_CEILING_MS: '200', JOB_LEASE_MS: String(LEASE_MS) });

  test('none takes over or reruns a turn that another instance is running', { timeout: 90_000 }, async () => {
    const store = await openStore(seeded.database.url, { pgSchema: seeded.database.pgSchema! });
    const servers: ServerProcess[] = [];
    const start = async (instance: string, skewMs: number) => {
      const server = await startServerProcess({
        ...seeded.env, INSTANCE_ID: instance, ...(skewMs === 0 ? {} : { NODE_OPTIONS: `--import=${PRELOAD}`, CLOCK_SKEW_MS: String(skewMs) }),
      });
      servers.push(server);
      return server;
    };
    try {
      const onTime = await start('on-time', 0);
      const behind = await start('behind', -SKEW_MS);
      // Each takes the turn sent to it (it has a free slot and the agent's line is empty).
      const sent = [];
      for (const [server, agentId, text] of [[onTime, seeded.agentIds[0]!, 'on time'], [behind, seeded.agentIds[1]!, 'behind']] as const) {
        const res = await postMessage(server, seeded.key, { text: `!sleep ${TURN_MS} ${text}`, agent_id: agentId }, { prefer: 'wait=0' });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        sent.push({ sessionId: res.body.session_id as string, reply: `You said: ${text}` });
      }
      // An instance a minute ahead starts while both turns run: at its start, and every 1.5 s
      // after, it looks for expired leases.
      const ahead = await start('ahead', SKEW_MS);
      // The duplicate window is judged by the same clock: a resend through the instance a
      // minute ahead, a moment after the original, is a duplicate of it (not 60 s too late).
      const original = await postMessage(onTime, seeded.key, { text: 'said twice', agent_id: seeded.agentIds[0]! }, { prefer: 'wait=0' });
      assert.equal(original.body.status, 'queued', JSON.stringify(original.body));
      const resent = await postMessage(ahead, seeded.key, { text: 'said twice', agent_id: seeded.agentIds[0]! }, { prefer: 'wait=0' });
      assert.equal(resent.body.status, 'duplicate', JSON.stringify(resent.body));
      sent.push({ sessionId: original.body.session_id as string, reply: 'You said: said twice' });

      for (const { sessionId, reply } of sent) {
        const deadline = Date.now() + TURN_MS + 20_000;
        let page;
        for (;;) {
          page = await transcriptFrom(onTime, seeded.key, sessionId);
          if (page.status === 'idle' && page.messages.length >= 2) break;
          assert.ok(Date.now() < deadline, `no reply in time: ${JSON.stringify(page)}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        assert.deepEqual(page.messages.map((m: { text: string }) => m.text).slice(1), [reply], 'one reply');
      }
      const jobs = await store.db.selectFrom('jobs').select(['id', 'attempts', 'status']).orderBy('id').execute();
      assert.deepEqual(jobs.map((job) => [job.status, job.attempts]), [['done', 1], ['done', 1], ['done', 1]],
        'each turn was claimed once: no instance found the other\'s lease expired');
    } finally {
      for (const server of servers) await server.kill('SIGKILL');
      await store.close();
    }
  });
});
