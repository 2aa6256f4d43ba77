import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { send } from '../testing/conversation.ts';
import { sql } from 'kysely';
import { startTestApp, type TestApp, withTestApp } from '../testing/harness.ts';

let t: TestApp;
before(async () => { t = await startTestApp({ waitCeilingMs: 5000 }); });
after(async () => { await t.close(); });

test('a job whose outcome cannot be written (its session vanished) ends failed instead of retrying forever', async () => {
  const u = await t.userWithAgent();
  const res = await send(t, u, { text: '!sleep 300 gone' }, { Prefer: 'wait=0' });
  assert.equal(res.json().status, 'processing');
  const sessionId = res.json().session_id;
  const job = await t.runtime.store.db.selectFrom('jobs').select(['id']).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
  await t.runtime.store.db.deleteFrom('sessions').where('id', '=', sessionId).execute();
  const state = await t.runtime.engine.waitForJob(Number(job.id), 10_000);
  assert.equal(state.job.status, 'failed');
  const row = await t.runtime.store.db.selectFrom('jobs').select(['status', 'attempts']).where('id', '=', job.id).executeTakeFirstOrThrow();
  assert.equal(row.status, 'failed');
  assert.equal(row.attempts, 1);
  // The agent is free again: its next turn runs.
  const next = await send(t, u, { text: 'still here' });
  assert.equal(next.json().status, 'completed');
});

test('a statement that fails while a job is enqueued gives its runner slot back', async () => {
  await withTestApp(async (app) => {
    const u = await app.userWithAgent({ plan: 'pro' });
    const { db, dialect } = app.runtime.store;
    // A real failure inside the enqueue: the database refuses the job row (a full disk, a
    // dropped connection or a statement timeout fail the same way).
    if (dialect === 'sqlite') {
      await sql`create trigger refuse_boom before insert on jobs when new.payload like '%boom%'
        begin select raise(abort, 'boom refused'); end`.execute(db);
    } else {
      await sql`create function refuse_boom() returns trigger language plpgsql as $$
        begin if new.payload like '%boom%' then raise exception 'boom refused'; end if; return new; end $$`.execute(db);
      await sql`create trigger refuse_boom before insert on jobs for each row execute function refuse_boom()`.execute(db);
    }
    for (let i = 0; i < 3; i++) {
      const refused = await send(app, u, { text: `boom ${i}` });
      assert.equal(refused.statusCode, 500);
    }
    // More failures than the instance has slots, and it still runs turns at once.
    const next = await send(app, u, { text: 'after the failures' });
    assert.equal(next.statusCode, 200);
    assert.equal(next.json().status, 'completed');
  }, { waitCeilingMs: 5000, runnerConcurrency: 2 });
});
