import assert from 'node:assert/strict';
import { test } from 'node:test';
import { looksLikeId, newId, randomBase62 } from './ids.ts';

test('an id is its prefix, 8 characters of time and 22 random ones, all base62', () => {
  const id = newId('session');
  assert.match(id, /^ses_[0-9A-Za-z]{30}$/);
  assert.ok(looksLikeId('session', id));
  assert.notEqual(newId('session').slice(12), newId('session').slice(12), 'the random part differs');
});

test('ids sort as they were made, across milliseconds (so new rows append to their indexes)', async () => {
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    made.push(newId('session'));
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  assert.deepEqual([...made].sort(), made);
});

test('random base62 uses every character about equally (no modulo bias)', () => {
  const counts = new Map<string, number>();
  const text = randomBase62(62_000);
  for (const char of text) counts.set(char, (counts.get(char) ?? 0) + 1);
  assert.equal(counts.size, 62);
  for (const [char, count] of counts) assert.ok(count > 800 && count < 1200, `${char}: ${count} of an expected 1,000`);
});
