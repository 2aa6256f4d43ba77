import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openStore } from '../store/store.ts';
import { API, startTestApp, type TestApp } from '../testing/harness.ts';
import { CachedReads } from './cached-reads.ts';
import { RequestCache } from './request-cache.ts';

/** A read that counts how often it ran, and gives `value` (the count itself by default). */
function counted<V = number>(value?: V) {
  const source = { reads: 0, read: async () => { source.reads++; return (value === undefined ? source.reads : value) as V; } };
  return source;
}

test('a read is kept and given again without reading, an unknown (undefined) one too', async () => {
  const cache = new CachedReads<number | undefined>(true, 10);
  const known = counted();
  assert.equal(await cache.get('k', known.read), 1);
  assert.equal(await cache.get('k', known.read), 1);
  assert.equal(known.reads, 1);
  let unknownReads = 0;
  const unknown = async () => { unknownReads++; return undefined; };
  assert.equal(await cache.get('nobody', unknown), undefined);
  assert.equal(await cache.get('nobody', unknown), undefined);
  assert.equal(unknownReads, 1);
});

test('forget drops one entry, clear every one', async () => {
  const cache = new CachedReads<number>(true, 10);
  const a = counted();
  const b = counted();
  await cache.get('a', a.read);
  await cache.get('b', b.read);
  cache.forget('a');
  assert.equal(await cache.get('a', a.read), 2);
  assert.equal(await cache.get('b', b.read), 1, 'b is still kept');
  cache.clear();
  assert.equal(await cache.get('a', a.read), 3);
  assert.equal(await cache.get('b', b.read), 2);
});

test('a read begun before a forget or a clear is given to its caller but not kept: it may hold what the write changed', async () => {
  for (const drop of [(cache: CachedReads<string>) => cache.forget('k'), (cache: CachedReads<string>) => cache.clear()]) {
    const cache = new CachedReads<string>(true, 10);
    assert.equal(await cache.get('k', async () => { drop(cache); return 'before the write'; }), 'before the write');
    assert.equal(await cache.get('k', async () => 'after'), 'after');
    assert.equal(await cache.get('k', async () => 'not read'), 'after');
  }
});

test('a failed read keeps nothing', async () => {
  const cache = new CachedReads<number>(true, 10);
  await assert.rejects(cache.get('k', async () => { throw new Error('database gone'); }), /database gone/);
  assert.equal(await cache.get('k', async () => 7), 7);
});

test('it holds at most its bound, dropping the oldest first', async () => {
  const cache = new CachedReads<string>(true, 2);
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

test('a commit by another connection drops everything at the next look; this store\'s own commits do not', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'agent-channel-request-cache-'));
  const store = await openStore(`sqlite:${join(dir, 'test.db')}`);
  const cli = await openStore(`sqlite:${join(dir, 'test.db')}`); // as the operator CLI
  try {
    const cache = new RequestCache(store);
    const key = counted<undefined>();
    const agents = counted([]);
    const fill = async () => {
      cache.dropIfWrittenElsewhere();
      await cache.keys.get('k', key.read);
      await cache.agentLists.get('u', agents.read);
    };
    await fill();
    await store.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: 'own', details: null }).execute();
    await fill();
    assert.deepEqual([key.reads, agents.reads], [1, 1], 'kept across this store\'s own commit');
    // SQLite tells commits apart per file, not per table: any commit of another connection counts.
    await cli.db.insertInto('audit_log').values({ at: new Date().toISOString(), actor_user_id: null, action: 'test', subject_id: 'cli', details: null }).execute();
    await fill();
    assert.deepEqual([key.reads, agents.reads], [2, 2], 'both read again after the other connection\'s commit');
    await fill();
    assert.deepEqual([key.reads, agents.reads], [2, 2], 'and kept again until the next one');
  } finally {
    await cli.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

let t: TestApp;
before(async () => { t = await startTestApp(); });
after(async () => { await t.close(); });

test('kept on SQLite; on PostgreSQL, where other instances write too, every call reads', async () => {
  const cache = new RequestCache(t.runtime.store);
  const source = counted([]);
  cache.dropIfWrittenElsewhere();
  await cache.agentLists.get('u', source.read);
  await cache.agentLists.get('u', source.read);
  assert.equal(source.reads, t.runtime.store.dialect === 'sqlite' ? 1 : 2);
});

test('the agents a user may message change at the very next request when the services write: a membership added or removed, an agent made', async () => {
  const owner = await t.userWithAgent({ plan: 'pro' });
  const member = await t.user();
  const agentsOf = async (user: { auth: Record<string, string> }) =>
    ((await t.inject({ url: `${API}/agents`, headers: user.auth })).json().agents as Array<{ agent_id: string }>).map((agent) => agent.agent_id);
  const send = (agentId: string) =>
    t.inject({ method: 'POST', url: `${API}/messages`, headers: { ...member.auth, prefer: 'wait=0' }, payload: { text: `hi ${Math.random()}`, agent_id: agentId } });
  const workspaceId = await t.runtime.services.accounts.personalWorkspaceId(owner.id);
  const { accounts, agents } = t.runtime.services;

  assert.deepEqual(await agentsOf(member), []);
  assert.equal((await send(owner.agentId)).statusCode, 404, 'read, and kept on SQLite');
  await accounts.addMember({ workspaceId, email: member.email, role: 'member' });
  assert.deepEqual(await agentsOf(member), [owner.agentId]);
  const second = await agents.create(owner.id, { agent_name: 'Second' });
  assert.deepEqual(await agentsOf(member), [owner.agentId, second.agent_id], 'an agent made in the workspace shows to its members too');
  assert.notEqual((await send(second.agent_id)).statusCode, 404);
  await accounts.removeMember({ workspaceId, email: member.email });
  assert.deepEqual(await agentsOf(member), []);
  assert.equal((await send(owner.agentId)).statusCode, 404);
});
