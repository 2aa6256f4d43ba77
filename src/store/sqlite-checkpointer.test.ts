import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { openStore, type Store } from './store.ts';

/** The background checkpointer on a real SQLite file: it copies the log back, and the log stays bounded. */
let dir: string;
let path: string;
let store: Store;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agent-channel-checkpoint-'));
  path = join(dir, 'test.db');
  store = await openStore(`sqlite:${path}`);
  await sql`create table filler (id integer primary key, body blob not null)`.execute(store.db);
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const PAGE = 4096;
const writePages = (pages: number) => store.db.transaction().execute(async (trx) => {
  for (let i = 0; i < pages; i++) await sql`insert into filler (body) values (randomblob(${PAGE - 100}))`.execute(trx);
});

async function eventually(check: () => boolean, ms = 3000): Promise<boolean> {
  for (const start = Date.now(); Date.now() - start < ms;) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return check();
}

test('pages committed below the automatic threshold reach the database file soon, without a checkpoint on the event loop', async () => {
  await writePages(200); // under SQLite's own 1,000-page threshold: without the thread they would wait in the log
  const sizeBefore = statSync(path).size;
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(statSync(path).size, sizeBefore, 'nothing copies them yet');
  store.startBackgroundCheckpoints();
  assert.ok(await eventually(() => statSync(path).size >= sizeBefore + 150 * PAGE), 'the checkpointer copied them into the file');
});

test('under continuous writes the log keeps starting over instead of growing', async () => {
  store.startBackgroundCheckpoints();
  for (let i = 0; i < 200; i++) await writePages(50); // 10,000 pages, about 40 MB, through the log
  const walBytes = statSync(`${path}-wal`).size;
  // A log that never started over would hold all 40 MB. Under a busy machine the thread may lag
  // a few restarts behind (17 MB was seen once in a full run), so the bound leaves room for that.
  assert.ok(walBytes < 24 * 1024 * 1024, `the log is ${walBytes} bytes`);
});

test('closing the store stops the thread', async () => {
  const other = await openStore(`sqlite:${join(dir, 'other.db')}`);
  other.startBackgroundCheckpoints();
  await other.close(); // would hang the test run (or throw) if the thread outlived it
});
