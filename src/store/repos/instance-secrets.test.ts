import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freshDatabase } from '../../testing/harness.ts';
import { openStore } from '../store.ts';
import { instanceSecret } from './instance-secrets.ts';

test('a deployment secret is made once: instances racing for it, and later ones, all get the same 32 bytes', async () => {
  const database = await freshDatabase();
  const options = database.pgSchema ? { pgSchema: database.pgSchema } : {};
  const [a, b] = [await openStore(database.url, options), await openStore(database.url, options)];
  try {
    const raced = await Promise.all([instanceSecret(a.db, 'test.key'), instanceSecret(b.db, 'test.key'), instanceSecret(a.db, 'test.key')]);
    assert.equal(raced[0]!.length, 32);
    for (const secret of raced) assert.deepEqual(secret, raced[0]);
    assert.notDeepEqual(await instanceSecret(a.db, 'other.key'), raced[0], 'each name has its own');
    await b.close();
    const reopened = await openStore(database.url, options);
    assert.deepEqual(await instanceSecret(reopened.db, 'test.key'), raced[0], 'and it survives a restart');
    await reopened.close();
  } finally {
    await a.close();
    await database.drop();
  }
});
