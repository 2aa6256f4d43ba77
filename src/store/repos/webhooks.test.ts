/** Claiming webhook deliveries: the limits a claimer sets on how many it takes, in all and of one endpoint. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { freshDatabase, type TestDatabase } from '../../testing/harness.ts';
import { openStore, type Store } from '../store.ts';
import { claimDueDeliveries } from './webhooks.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await freshDatabase();
  store = await openStore(database.url, { pgSchema: database.pgSchema });
});
after(async () => {
  await store.close();
  await database.drop();
});

const MADE = '2026-11-29T08:00:00.000Z';

async function endpointWithDue(id: string, deliveries: number): Promise<void> {
  await store.db.insertInto('webhook_endpoints').values({
    id, owner_user_id: 'usr_claims', url: 'https://hooks.example.test/', events: '[]', sealed_secret: 'sealed', enabled: 1,
    disabled_reason: null, created_at: MADE, last_attempt_at: null, last_outcome: null,
  }).execute();
  await store.db.insertInto('webhook_deliveries').values(Array.from({ length: deliveries }, (_, n) => ({
    endpoint_id: id, event_id: `evt_${id}_${n}`, event_type: 'turn.completed', payload: '{}', state: 'pending' as const, attempts: 0,
    next_attempt_at: MADE, created_at: MADE,
  }))).execute();
}

test('an endpoint gets only the room its attempts in flight leave it, a full one none; the rest of the room goes to the others', async () => {
  await endpointWithDue('whk_busy', 5);
  await endpointWithDue('whk_full', 5);
  await endpointWithDue('whk_idle', 5);
  const inFlight = new Map([['whk_busy', 3], ['whk_full', 4]]);
  const claimed = await claimDueDeliveries(store.db, {
    leaseOwner: 'test:1', now: '2026-11-29T09:00:00.000Z', leaseUntil: '2026-11-29T09:00:15.000Z', room: 10, perEndpoint: 4, inFlight,
  });
  const byEndpoint = Object.fromEntries(['whk_busy', 'whk_full', 'whk_idle'].map((id) => [id, claimed.filter((d) => d.endpointId === id).length]));
  assert.deepEqual(byEndpoint, { whk_busy: 1, whk_full: 0, whk_idle: 4 });

  const more = await claimDueDeliveries(store.db, {
    leaseOwner: 'test:2', now: '2026-11-29T09:00:00.000Z', leaseUntil: '2026-11-29T09:00:15.000Z', room: 2, perEndpoint: 4, inFlight: new Map(),
  });
  assert.equal(more.length, 2, 'never more than the room in all');
  assert.ok(more.every((d) => !claimed.some((c) => c.id === d.id)), 'a leased delivery is not claimed again');
});
