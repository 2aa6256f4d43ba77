import assert from 'node:assert/strict';
import { rmSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';

import { openStore } from '../store/store.ts';
import { seededDatabase, startTestApp, TEST_DB } from '../testing/harness.ts';
import { pollTranscript, send } from '../testing/conversation.ts';
import { postMessage, startServerProcess, transcriptFrom, type ServerProcess } from '../testing/server-process.ts';

/**
 * The real server process, killed with SIGKILL while turns are mid-work, restarted: every
 * reply must land in its transcript exactly once. SIGTERM: running turns finish within the
 * grace period; what is cut off resumes at the next start.
 */

const seeded = seededDatabase('crash@example.test', 3, { WAIT_CEILING_MS: '200', JOB_LEASE_MS: '1500', SHUTDOWN_GRACE_MS: '3000' });

const post = (server: ServerProcess, body: unknown, headers?: Record<string, string>) => postMessage(server, seeded.key, body, headers);
const transcriptOf = (server: ServerProcess, sessionId: string) => transcriptFrom(server, seeded.key, sessionId);

async function untilIdle(server: ServerProcess, sessionIds: string[], timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pages = await Promise.all(sessionIds.map((id) => transcriptOf(server, id)));
    if (pages.every((p) => p.status === 'idle')) return pages;
    if (Date.now() > deadline) throw new Error(`sessions never went idle: ${JSON.stringify(pages.map((p) => p.status))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('SIGKILL mid-turn, restart: every reply lands exactly once', { timeout: 90_000 }, async () => {
  let server = await startServerProcess(seeded.env);
  const sent: { sessionId: string; expected: string }[] = [];
  try {
    // Per agent: one turn running (a long sleep) and two queued behind it.
    for (let round = 0; round < 3; round++) {
      for (const [i, agentId] of seeded.agentIds.entries()) {
        const word = `reply-${round}-${i}`;
        const res = await post(server, { text: `!sleep ${round === 0 ? 2500 : 300} ${word}`, agent_id: agentId });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        sent.push({ sessionId: res.body.session_id, expected: `You said: ${word}` });
      }
    }
    const statuses = await Promise.all(sent.map((s) => transcriptOf(server, s.sessionId).then((p) => p.status)));
    assert.ok(statuses.includes('processing') && statuses.includes('queued'), `mid-work: ${statuses.join(',')}`);
  } finally {
    const gone = await server.kill('SIGKILL');
    assert.equal(gone.signal, 'SIGKILL');
  }

  server = await startServerProcess(seeded.env);
  try {
    const pages = await untilIdle(server, sent.map((s) => s.sessionId));
    for (const [i, page] of pages.entries()) {
      const replies = page.messages.filter((m: any) => m.role === 'agent');
      assert.equal(replies.length, 1, `session ${i}: ${JSON.stringify(page.messages)}`);
      assert.equal(replies[0].text, sent[i]!.expected);
      assert.equal(replies[0].error, undefined);
    }
  } finally {
    await server.kill('SIGTERM');
  }
});

/** Starts a server, sends `text`, sends SIGTERM while the turn runs; returns what the database holds right after exit. */
async function sigtermDuring(text: string, agentId: string, graceMs: number) {
  const server = await startServerProcess({ ...seeded.env, SHUTDOWN_GRACE_MS: String(graceMs) });
  const res = await post(server, { text, agent_id: agentId });
  assert.equal(res.status, 202);
  const exit = await server.kill('SIGTERM');
  assert.equal(exit.code, 0, 'a graceful shutdown exits 0');
  const store = await openStore(seeded.database.url, seeded.database.pgSchema ? { pgSchema: seeded.database.pgSchema } : {});
  try {
    const job = await store.db.selectFrom('jobs').select(['status']).where('session_id', '=', res.body.session_id).executeTakeFirstOrThrow();
    const replies = await store.db.selectFrom('turns').select(['text']).where('session_id', '=', res.body.session_id).where('role', '=', 'agent').execute();
    return { sessionId: res.body.session_id as string, jobStatus: job.status, replies: replies.map((r) => r.text) };
  } finally {
    await store.close();
  }
}

async function repliesAfterRestart(sessionId: string): Promise<string[]> {
  const again = await startServerProcess(seeded.env);
  try {
    const [page] = await untilIdle(again, [sessionId]);
    return page.messages.filter((m: any) => m.role === 'agent').map((m: any) => m.text);
  } finally {
    await again.kill('SIGTERM');
  }
}

test('SIGTERM: a running turn finishes within the grace period, before the process exits', { timeout: 60_000 }, async () => {
  const atExit = await sigtermDuring('!sleep 800 finished before exit', seeded.agentIds[0]!, 5000);
  assert.equal(atExit.jobStatus, 'done');
  assert.deepEqual(atExit.replies, ['You said: finished before exit']);
  assert.deepEqual(await repliesAfterRestart(atExit.sessionId), ['You said: finished before exit'], 'and it does not run again');
});

test('SIGTERM: a turn longer than the grace period is given back and completes once after restart', { timeout: 60_000 }, async () => {
  const atExit = await sigtermDuring('!sleep 1500 after restart', seeded.agentIds[1]!, 200);
  assert.equal(atExit.jobStatus, 'queued', 'given back to the queue');
  assert.deepEqual(atExit.replies, []);
  assert.deepEqual(await repliesAfterRestart(atExit.sessionId), ['You said: after restart']);
});

/** The session's one turn ends with this reply, run once (one attempt), by the server that took it. */
async function assertRunOnceBy(server: ServerProcess, sessionId: string, reply: string) {
  const pages = await untilIdle(server, [sessionId]);
  assert.deepEqual(pages[0].messages.filter((m: any) => m.role === 'agent').map((m: any) => m.text), [reply]);
  const store = await openStore(seeded.database.url, seeded.database.pgSchema ? { pgSchema: seeded.database.pgSchema } : {});
  try {
    const [job] = await store.db.selectFrom('jobs').select(['attempts', 'status']).where('session_id', '=', sessionId).execute();
    assert.deepEqual({ ...job }, { attempts: 1, status: 'done' }, 'run once, by the server that took it');
  } finally {
    await store.close();
  }
}

test('a second server started by mistake on the port of a running one fails without touching the work under way', { timeout: 60_000 }, async () => {
  const server = await startServerProcess(seeded.env);
  try {
    const res = await post(server, { text: '!sleep 1500 still mine', agent_id: seeded.agentIds[2]! }, { prefer: 'wait=0' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await assert.rejects(startServerProcess({ ...seeded.env, PORT: new URL(server.url).port }), /exited before listening/);
    await assertRunOnceBy(server, res.body.session_id, 'You said: still mine');
  } finally {
    await server.kill('SIGKILL');
  }
});

test('SQLite: a second server on another port but the same file is refused before it listens, and the work under way runs once', { skip: TEST_DB !== 'sqlite' && 'PostgreSQL takes several instances', timeout: 60_000 }, async () => {
  const server = await startServerProcess(seeded.env);
  try {
    const res = await post(server, { text: '!sleep 1500 only once', agent_id: seeded.agentIds[2]! }, { prefer: 'wait=0' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const second = await startServerProcess(seeded.env).catch((error: Error) => error);
    if (!(second instanceof Error)) {
      await second.kill('SIGTERM');
      assert.fail('a second server started on the same SQLite file');
    }
    assert.match(second.message, /exited before listening/);
    assert.match(second.message, /another agent-channel server is using the SQLite database/);
    await assertRunOnceBy(server, res.body.session_id, 'You said: only once');
  } finally {
    await server.kill('SIGKILL');
  }
  // The lock dies with its process: after a SIGKILL the next server starts at once.
  const next = await startServerProcess(seeded.env);
  await next.kill('SIGTERM');
});

test('SQLite: a second server reaching the same file through a symbolic link is refused too, and the work under way runs once', { skip: TEST_DB !== 'sqlite' && 'PostgreSQL takes several instances', timeout: 60_000 }, async () => {
  const path = seeded.database.url.slice('sqlite:'.length);
  const link = join(dirname(path), 'another-name.db');
  symlinkSync(path, link);
  const server = await startServerProcess(seeded.env);
  try {
    const res = await post(server, { text: '!sleep 1500 still only once', agent_id: seeded.agentIds[2]! }, { prefer: 'wait=0' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const second = await startServerProcess({ ...seeded.env, DATABASE_URL: `sqlite:${link}` }).catch((error: Error) => error);
    if (!(second instanceof Error)) {
      await second.kill('SIGTERM');
      assert.fail('a second server started on the same SQLite file through a link');
    }
    assert.match(second.message, /another agent-channel server is using the SQLite database/);
    await assertRunOnceBy(server, res.body.session_id, 'You said: still only once');
  } finally {
    await server.kill('SIGKILL');
    rmSync(link);
  }
});

test('SQLite: a turn left running by a process that died (its fourth death) runs again at once at the next start, neither failed nor waiting out its lease', { skip: TEST_DB !== 'sqlite' && 'on PostgreSQL other instances may be alive: only expired leases are taken over', timeout: 30_000 }, async () => {
  let t = await startTestApp({ waitCeilingMs: 5000 });
  try {
    const u = await t.userWithAgent();
    await t.runtime.engine.stop(0); // nothing runs: the message stays queued
    const sessionId = (await send(t, u, { text: 'after the crash' }, { Prefer: 'wait=0' })).json().session_id;
    // What a process killed mid-turn leaves behind: its job running under its lease, for an hour
    // more, and (its runner having died three times before) four attempts.
    await t.runtime.store.db.updateTable('jobs').set({
      status: 'running', attempts: 4, lease_owner: 'a-process-that-died', lease_expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      started_at: new Date().toISOString(),
    }).where('session_id', '=', sessionId).execute();
    t = await t.restart();
    const page = await pollTranscript(t, u, sessionId, (b) => b.status === 'idle' && b.messages.length === 2);
    assert.deepEqual(page.messages.map((m: { text: string; error?: string }) => [m.text, m.error]), [['after the crash', undefined], ['You said: after the crash', undefined]]);
  } finally {
    await t.close();
  }
});
