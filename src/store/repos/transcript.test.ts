/** The session clock as turns are appended: ts unique and increasing whatever the wall clock says. */
import assert from 'node:assert/strict';
import { after, before, mock, test } from 'node:test';
import { newId } from '../../domain/ids.ts';
import { formatTs, nowMicros, parseTs } from '../../domain/turn-clock.ts';
import { startTestApp, type TestApp } from '../../testing/harness.ts';
import { appendTurnIfSessionExists } from './transcript.ts';

let t: TestApp;
let owner: { id: string; agentId: string };
before(async () => {
  t = await startTestApp();
  owner = await t.userWithAgent();
});
after(async () => { await t.close(); });

async function sessionWithClock(lastTs: string | null): Promise<string> {
  const id = newId('session');
  await t.runtime.store.db.insertInto('sessions')
    .values({ id, user_id: owner.id, agent_id: owner.agentId, channel: 'api', last_ts: lastTs, created_at: new Date().toISOString() }).execute();
  return id;
}

const append = (sessionId: string, text: string) => t.runtime.store.db.transaction()
  .execute((trx) => appendTurnIfSessionExists(trx, t.runtime.store.dialect, { sessionId, role: 'user', text }));

const storedClock = async (sessionId: string) =>
  (await t.runtime.store.db.selectFrom('sessions').select('last_ts').where('id', '=', sessionId).executeTakeFirstOrThrow()).last_ts;

test('a clock behind the present moves to the present', async () => {
  const sessionId = await sessionWithClock(formatTs(nowMicros() - 5_000_000n));
  const before = nowMicros();
  const turn = await append(sessionId, 'now');
  const at = parseTs(turn!.ts)!;
  assert.ok(at >= before && at <= nowMicros(), `${turn!.ts} is the time of the append`);
  assert.equal(await storedClock(sessionId), turn!.ts);
});

test('a clock ahead of the present (a wall clock set back) still gives each turn a later ts', async () => {
  const ahead = nowMicros() + 60_000_000n;
  const sessionId = await sessionWithClock(formatTs(ahead));
  const first = await append(sessionId, 'one');
  const second = await append(sessionId, 'two');
  assert.equal(first!.ts, formatTs(ahead + 1n));
  assert.equal(second!.ts, formatTs(ahead + 2n));
  assert.equal(await storedClock(sessionId), second!.ts);
});

test('a session that never had a turn starts its clock at the present', async () => {
  const sessionId = await sessionWithClock(null);
  const before = nowMicros();
  const turn = await append(sessionId, 'first');
  assert.ok(turn);
  const at = parseTs(turn.ts)!;
  assert.ok(at >= before && at <= nowMicros(), `${turn.ts} is the time of the append`);
  assert.equal(await storedClock(sessionId), turn.ts);
});

test('no session, no turn', async () => {
  assert.equal(await append(newId('session'), 'nowhere'), null);
  const { count } = await t.runtime.store.db.selectFrom('turns').select((eb) => eb.fn.countAll<number>().as('count'))
    .where('text', '=', 'nowhere').executeTakeFirstOrThrow();
  assert.equal(Number(count), 0);
});

test('turns appended at once to one session get distinct, increasing ts in commit order', async () => {
  const sessionId = await sessionWithClock(null);
  const turns = await Promise.all(Array.from({ length: 40 }, (_, i) => append(sessionId, `turn ${i}`)));
  const stamps = turns.map((turn) => turn!.ts);
  assert.equal(new Set(stamps).size, stamps.length);
  const stored = await t.runtime.store.db.selectFrom('turns').select(['ts']).where('session_id', '=', sessionId).orderBy('id').execute();
  const inInsertOrder = stored.map((row) => row.ts);
  assert.deepEqual(inInsertOrder, [...inInsertOrder].sort(), 'later inserts carry later ts');
  assert.equal(await storedClock(sessionId), inInsertOrder.at(-1));
});

test('two turns appended within one microsecond of the clock still get distinct, increasing ts', async () => {
  const sessionId = await sessionWithClock(null);
  // The wall clock standing still (two appends inside one microsecond): only the session's own
  // clock can tell the turns apart.
  const frozen = performance.now();
  const clock = mock.method(performance, 'now', () => frozen);
  let first;
  let second;
  try {
    first = await append(sessionId, 'one');
    second = await append(sessionId, 'two');
  } finally {
    clock.mock.restore();
  }
  assert.ok(first && second);
  assert.equal(parseTs(second.ts), parseTs(first.ts)! + 1n, `${second.ts} one microsecond after ${first.ts}`);
  assert.equal(await storedClock(sessionId), second.ts);
});
