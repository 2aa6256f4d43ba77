import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AccountReadCache } from './account-cache.ts';

function counter() {
  let reads = 0;
  return { read: async () => ++reads, get reads() { return reads; } };
}

test('a copy is served while the generation is unchanged, and read again once it moves', async () => {
  let generation = 1;
  const cache = new AccountReadCache<number>(() => generation);
  const source = counter();
  assert.equal(await cache.get('k', source.read), 1);
  assert.equal(await cache.get('k', source.read), 1);
  assert.equal(source.reads, 1);
  generation++;
  assert.equal(await cache.get('k', source.read), 2);
  assert.equal(source.reads, 2);
});

test('a copy is tagged with the generation seen before its read began, so a write during the read is not missed', async () => {
  let generation = 1;
  const cache = new AccountReadCache<string>(() => generation);
  // The write lands while the read is in flight: the copy must not be trusted afterwards.
  assert.equal(await cache.get('k', async () => { generation++; return 'old'; }), 'old');
  assert.equal(await cache.get('k', async () => 'new'), 'new');
});

test('without a generation (PostgreSQL) every call reads', async () => {
  const cache = new AccountReadCache<number>(null);
  const source = counter();
  await cache.get('k', source.read);
  await cache.get('k', source.read);
  assert.equal(source.reads, 2);
});

test('it holds at most its bound, dropping the oldest first', async () => {
  const cache = new AccountReadCache<string>(() => 1, 2);
  const reads: string[] = [];
  const read = (key: string) => async () => { reads.push(key); return key; };
  await cache.get('a', read('a'));
  await cache.get('b', read('b'));
  await cache.get('c', read('c')); // a goes
  await cache.get('b', read('b'));
  await cache.get('c', read('c'));
  await cache.get('a', read('a'));
  assert.deepEqual(reads, ['a', 'b', 'c', 'a']);
});

test('a failed read keeps nothing', async () => {
  const cache = new AccountReadCache<number>(() => 1);
  await assert.rejects(async () => cache.get('k', async () => { throw new Error('database gone'); }), /database gone/);
  assert.equal(await cache.get('k', async () => 7), 7);
});

test('a copy held is given at once, not as a promise; a read is a promise', async () => {
  let generation = 1;
  const cache = new AccountReadCache<string>(() => generation);
  const first = cache.get('k', async () => 'read');
  assert.ok(first instanceof Promise, 'nothing held yet: the read is waited for');
  assert.equal(await first, 'read');
  assert.equal(cache.get('k', async () => 'again'), 'read');
  generation++;
  assert.ok(cache.get('k', async () => 'again') instanceof Promise, 'a copy of an older generation is not given');
});
