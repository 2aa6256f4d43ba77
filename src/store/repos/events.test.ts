/** The event feed's order: a reader paging with its last position never skips or repeats an event. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { eventIdOf, type NewFeedEvent } from '../../domain/feed-events.ts';
import { freshDatabase, type TestDatabase } from '../../testing/harness.ts';
import { openStore, type Store } from '../store.ts';
import { cursorStanding, deleteEventsBefore, newestPosition, readEvents, recordEvents } from './events.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await freshDatabase();
  store = await openStore(database.url, { pgSchema: database.pgSchema, pgPoolSize: 12 });
});
after(async () => {
  await store.close();
  await database.drop();
});

const pending = (recipients: string[], n: number): NewFeedEvent => ({
  type: 'question.answered', sessionId: 'ses_feed', agentId: 'agt_feed', recipients, data: { request_id: `req_${n}` },
});

test('many writers committing out of the order they drew positions in: a concurrent reader sees every event once, in order', async () => {
  const writers = 8;
  const perWriter = 25;
  let writing = true;
  const seen: string[] = [];
  const reader = (async () => {
    let cursor = 0;
    for (;;) {
      const done = !writing; // one more full read after the last commit
      const page = await readEvents(store.db, 'usr_reader', cursor, 200);
      for (const event of page.events) seen.push((event.data as { request_id: string }).request_id);
      cursor = Number(page.events.at(-1)?.id.slice(4) ?? cursor);
      if (done && !page.hasMore) return;
      await sleep(1);
    }
  })();
  await Promise.all(Array.from({ length: writers }, async (_, w) => {
    for (let i = 0; i < perWriter; i++) {
      await store.db.transaction().execute(async (trx) => {
        // Another person's event in the same transaction: locks are taken in one order, so none waits crosswise.
        await recordEvents(trx, store.dialect, [pending(['usr_reader', w % 2 ? 'usr_other' : 'usr_third'], w * 1000 + i)], new Date().toISOString());
        // Held open past other writers' commits: positions drawn earlier would commit later.
        await sleep(Math.random() * 4);
      });
    }
  }));
  writing = false;
  await reader;
  const stored = await store.db.selectFrom('events').select('id').where('recipient_user_id', '=', 'usr_reader').execute();
  assert.equal(stored.length, writers * perWriter);
  assert.equal(seen.length, writers * perWriter, 'every event once');
  assert.equal(new Set(seen).size, seen.length, 'no event twice');
});

test('a page is oldest first, filtered by session on request, with has_more', async () => {
  await store.db.transaction().execute(async (trx) => {
    await recordEvents(trx, store.dialect, [
      { type: 'turn.completed', sessionId: 'ses_a', agentId: 'agt_x', recipients: ['usr_pager'], data: { text: 'one', ts: 't1' } },
      { type: 'turn.completed', sessionId: 'ses_b', agentId: 'agt_x', recipients: ['usr_pager'], data: { text: 'two', ts: 't2' } },
      { type: 'turn.completed', sessionId: 'ses_a', agentId: 'agt_x', recipients: ['usr_pager'], data: { text: 'three', ts: 't3' } },
    ], '2026-01-01T00:00:00.000Z');
  });
  const first = await readEvents(store.db, 'usr_pager', 0, 2);
  assert.deepEqual(first.events.map((e) => (e.data as { text: string }).text), ['one', 'two']);
  assert.equal(first.hasMore, true);
  const onlyA = await readEvents(store.db, 'usr_pager', 0, 50, 'ses_a');
  assert.deepEqual(onlyA.events.map((e) => (e.data as { text: string }).text), ['one', 'three']);
  assert.equal(onlyA.hasMore, false);
  assert.equal(await newestPosition(store.db, 'usr_pager'), Number(onlyA.events[1]!.id.slice(4)));
  assert.equal(await newestPosition(store.db, 'usr_nobody'), 0);
});

test('a cursor is the caller\'s, another\'s (unknown), or expired once retention removed it', async () => {
  await store.db.transaction().execute((trx) => recordEvents(trx, store.dialect, [pending(['usr_old'], 1)], '2000-01-01T00:00:00.000Z'));
  const old = (await readEvents(store.db, 'usr_old', 0, 1)).events[0]!;
  const position = Number(old.id.slice(4));
  assert.equal(old.id, eventIdOf(position));
  assert.equal(await cursorStanding(store.db, 'usr_old', position), 'mine');
  assert.equal(await cursorStanding(store.db, 'usr_pager', position), 'unknown');
  // Retention removes the oldest first: with none kept, any cursor may have been one.
  assert.ok(await deleteEventsBefore(store.db, '9999-01-01T00:00:00.000Z') >= 1);
  assert.equal(await cursorStanding(store.db, 'usr_old', position), 'expired');
  await store.db.transaction().execute((trx) => recordEvents(trx, store.dialect, [pending(['usr_old'], 2)], new Date().toISOString()));
  assert.equal(await cursorStanding(store.db, 'usr_old', position), 'expired', 'below the oldest kept');
  assert.equal(await cursorStanding(store.db, 'usr_old', 10_000_000), 'unknown', 'above every event');
});
