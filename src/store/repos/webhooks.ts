import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, WebhookDeliveryState } from '../schema.ts';

/**
 * Every statement of webhooks (contract §9.5): endpoints, and their deliveries. A delivery is
 * written in the transaction that records its event (fanOutDeliveries, called by recordEvents),
 * so an event committed is an event that will be delivered. An instance claims due deliveries
 * by setting a lease on them with a conditional update: two instances racing for one row
 * cannot both match it (PostgreSQL re-checks the condition after the first commits), and a
 * lease that ran out (its instance died) makes the row claimable again.
 */

export interface EndpointRow {
  id: string;
  owner_user_id: string;
  url: string;
  events: string;
  sealed_secret: string;
  enabled: number;
  disabled_reason: string | null;
  created_at: string;
  last_attempt_at: string | null;
  last_outcome: string | null;
}

const ENDPOINT_COLUMNS = ['id', 'owner_user_id', 'url', 'events', 'sealed_secret', 'enabled', 'disabled_reason', 'created_at',
  'last_attempt_at', 'last_outcome'] as const;

export async function insertEndpoint(db: Kysely<DB>, row: EndpointRow): Promise<void> {
  await db.insertInto('webhook_endpoints').values(row).execute();
}

export async function endpointsOf(db: Kysely<DB>, ownerUserId: string): Promise<EndpointRow[]> {
  return db.selectFrom('webhook_endpoints').select(ENDPOINT_COLUMNS).where('owner_user_id', '=', ownerUserId)
    .orderBy('created_at').orderBy('id').execute();
}

export async function endpointOf(db: Kysely<DB>, ownerUserId: string, id: string): Promise<EndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').select(ENDPOINT_COLUMNS).where('owner_user_id', '=', ownerUserId).where('id', '=', id)
    .executeTakeFirst();
}

export async function countEndpointsOf(db: Kysely<DB>, ownerUserId: string): Promise<number> {
  const row = await db.selectFrom('webhook_endpoints').select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('owner_user_id', '=', ownerUserId).executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Deletes an endpoint of `ownerUserId` and its deliveries; false when it has none by that id. */
export async function deleteEndpoint(db: Kysely<DB>, ownerUserId: string, id: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx.deleteFrom('webhook_endpoints').where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return false;
    await trx.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
    return true;
  });
}

/** Enables (reason cleared) or disables an endpoint of `ownerUserId`; false when it has none by that id. */
export async function setEndpointEnabled(db: Kysely<DB>, ownerUserId: string, id: string, enabled: boolean, reason: string | null): Promise<boolean> {
  const result = await db.updateTable('webhook_endpoints').set({ enabled: enabled ? 1 : 0, disabled_reason: enabled ? null : reason })
    .where('owner_user_id', '=', ownerUserId).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** An enabled endpoint of an event's recipient, with the types it subscribes to. */
export interface SubscribedEndpoint {
  id: string;
  ownerUserId: string;
  types: readonly string[];
}

/** The enabled endpoints of these people: read before their events are recorded, to know whether any delivery follows. */
export async function subscribedEndpointsOf(trx: Transaction<DB>, recipients: readonly string[]): Promise<SubscribedEndpoint[]> {
  if (recipients.length === 0) return [];
  const rows = await trx.selectFrom('webhook_endpoints').select(['id', 'owner_user_id', 'events'])
    .where('owner_user_id', 'in', recipients).where('enabled', '=', 1).execute();
  return rows.map((row) => ({ id: row.id, ownerUserId: row.owner_user_id, types: JSON.parse(row.events) as string[] }));
}

/** An event row just recorded for one recipient, with its JSON as the feed shows it. */
export interface RecordedEvent {
  eventId: string;
  recipientUserId: string;
  type: string;
  payload: string;
}

/**
 * In the transaction that records `events`: one pending delivery for each event and each of
 * `endpoints` (subscribedEndpointsOf) that belongs to its recipient and subscribes to its type.
 */
export async function fanOutDeliveries(
  trx: Transaction<DB>, endpoints: readonly SubscribedEndpoint[], events: readonly RecordedEvent[], now: string,
): Promise<number> {
  const rows = events.flatMap((event) => endpoints
    .filter((endpoint) => endpoint.ownerUserId === event.recipientUserId && endpoint.types.includes(event.type))
    .map((endpoint) => ({
      endpoint_id: endpoint.id, event_id: event.eventId, event_type: event.type, payload: event.payload,
      state: 'pending' as const, attempts: 0, next_attempt_at: now, created_at: now,
    })));
  if (rows.length > 0) await trx.insertInto('webhook_deliveries').values(rows).execute();
  return rows.length;
}

/** A delivery claimed for one attempt, with what the attempt needs of its endpoint. */
export interface ClaimedDelivery {
  id: number;
  endpointId: string;
  ownerUserId: string;
  url: string;
  sealedSecret: string;
  eventId: string;
  eventType: string;
  payload: string;
  attempts: number;
  createdAt: string;
}

// Unqualified, for the update (SQLite's RETURNING takes no table alias); the select reads one table's columns by these names.
const due = (now: string) => sql<boolean>`state = 'pending' and next_attempt_at <= ${now} and (lease_until is null or lease_until < ${now})`;

/**
 * Claims for `leaseOwner` (a token unique to this claim) due deliveries of enabled endpoints,
 * the longest due first: at most `room` in all, and of any one endpoint at most `perEndpoint`
 * less its attempts `inFlight` (the claimer's own count, read as it stands when each candidate
 * is judged); endpoints with no room left are not even read.
 */
export async function claimDueDeliveries(db: Kysely<DB>, options: {
  leaseOwner: string; now: string; leaseUntil: string; room: number; perEndpoint: number; inFlight: ReadonlyMap<string, number>;
}): Promise<ClaimedDelivery[]> {
  const { leaseOwner, now, leaseUntil, room, perEndpoint, inFlight } = options;
  if (room <= 0) return [];
  const full = [...inFlight].filter(([, count]) => count >= perEndpoint).map(([id]) => id);
  const roomOf = (endpointId: string) => perEndpoint - (inFlight.get(endpointId) ?? 0);
  const candidates = await db.selectFrom('webhook_deliveries').select(['id', 'endpoint_id']).where(due(now))
    .where('endpoint_id', 'in', (eb) => eb.selectFrom('webhook_endpoints as e').select('e.id').where('e.enabled', '=', 1))
    .$if(full.length > 0, (q) => q.where('endpoint_id', 'not in', full))
    .orderBy('next_attempt_at').orderBy('id').limit(Math.max(room * 4, 64)).execute();
  const taken = new Map<string, number>();
  const picked: number[] = [];
  for (const candidate of candidates) {
    if (picked.length >= room) break;
    const count = taken.get(candidate.endpoint_id) ?? 0;
    if (count >= roomOf(candidate.endpoint_id)) continue;
    taken.set(candidate.endpoint_id, count + 1);
    picked.push(Number(candidate.id));
  }
  if (picked.length === 0) return [];
  const claimed = await db.updateTable('webhook_deliveries').set({ lease_owner: leaseOwner, lease_until: leaseUntil })
    .where('id', 'in', picked).where(due(now)).returning('id').execute();
  if (claimed.length === 0) return [];
  const rows = await db.selectFrom('webhook_deliveries as d').innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select(['d.id', 'd.endpoint_id', 'e.owner_user_id', 'e.url', 'e.sealed_secret', 'd.event_id', 'd.event_type', 'd.payload', 'd.attempts', 'd.created_at'])
    .where('d.id', 'in', claimed.map((row) => Number(row.id))).where('d.lease_owner', '=', leaseOwner).orderBy('d.id').execute();
  return rows.map((row) => ({
    id: Number(row.id), endpointId: row.endpoint_id, ownerUserId: row.owner_user_id, url: row.url, sealedSecret: row.sealed_secret,
    eventId: row.event_id, eventType: row.event_type, payload: row.payload, attempts: Number(row.attempts), createdAt: row.created_at,
  }));
}

/** What one attempt came to: its HTTP status (null when none came back) or error, and how long it took. */
export interface AttemptResult {
  status: number | null;
  error: string | null;
  durationMs: number;
  at: string;
}

/**
 * Writes an attempt's end under the lease that claimed it: delivered, due again at `retryAt`,
 * or given up (`retryAt` null), which disables the endpoint with `disableReason`. False when
 * the lease was no longer this claim's (another instance took the delivery over).
 */
export async function finishAttempt(db: Kysely<DB>, delivery: { id: number; endpointId: string; leaseOwner: string }, result: AttemptResult & {
  state: WebhookDeliveryState; retryAt: string | null; disableReason: string | null; outcome: string;
}): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const updated = await trx.updateTable('webhook_deliveries').set({
      state: result.state, attempts: sql<number>`attempts + 1`, lease_owner: null, lease_until: null,
      next_attempt_at: result.retryAt ?? result.at, last_status: result.status, last_error: result.error,
      last_duration_ms: Math.round(result.durationMs), finished_at: result.state === 'pending' ? null : result.at,
    }).where('id', '=', delivery.id).where('lease_owner', '=', delivery.leaseOwner).executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) return false;
    await trx.updateTable('webhook_endpoints').set({
      last_attempt_at: result.at, last_outcome: result.outcome,
      ...(result.disableReason !== null ? { enabled: 0, disabled_reason: result.disableReason } : {}),
    }).where('id', '=', delivery.endpointId).execute();
    return true;
  });
}

/** Gives a claimed delivery back unattempted (a shutdown cut its attempt off): due again at once. */
export async function releaseLease(db: Kysely<DB>, id: number, leaseOwner: string): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ lease_owner: null, lease_until: null }).where('id', '=', id).where('lease_owner', '=', leaseOwner).execute();
}

/** At start on SQLite (one server per file): whatever a crash left leased is due again now. */
export async function releaseAllLeases(db: Kysely<DB>): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ lease_owner: null, lease_until: null })
    .where('state', '=', 'pending').where('lease_owner', 'is not', null).execute();
}

export interface DeliveryRow {
  id: number;
  event_id: string;
  event_type: string;
  state: WebhookDeliveryState;
  attempts: number;
  next_attempt_at: string;
  last_status: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  created_at: string;
  finished_at: string | null;
}

/** An endpoint's latest deliveries, newest first. */
export async function recentDeliveries(db: Kysely<DB>, endpointId: string, limit: number): Promise<DeliveryRow[]> {
  const rows = await db.selectFrom('webhook_deliveries')
    .select(['id', 'event_id', 'event_type', 'state', 'attempts', 'next_attempt_at', 'last_status', 'last_error', 'last_duration_ms', 'created_at', 'finished_at'])
    .where('endpoint_id', '=', endpointId).orderBy('id', 'desc').limit(limit).execute();
  return rows.map((row) => ({ ...row, id: Number(row.id), attempts: Number(row.attempts) }));
}

/** A new delivery of an earlier one's event to the same endpoint, due now (the same webhook-id); false when there is no such delivery. */
export async function copyDelivery(db: Kysely<DB>, endpointId: string, deliveryId: number, now: string): Promise<boolean> {
  const row = await db.selectFrom('webhook_deliveries').select(['event_id', 'event_type', 'payload'])
    .where('endpoint_id', '=', endpointId).where('id', '=', deliveryId).executeTakeFirst();
  if (!row) return false;
  await db.insertInto('webhook_deliveries').values({
    endpoint_id: endpointId, event_id: row.event_id, event_type: row.event_type, payload: row.payload,
    state: 'pending', attempts: 0, next_attempt_at: now, created_at: now,
  }).execute();
  return true;
}

/** Deliveries not yet made, by endpoint (for the backlog metric). */
export async function pendingByEndpoint(db: Kysely<DB>): Promise<Array<{ endpointId: string; count: number }>> {
  const rows = await db.selectFrom('webhook_deliveries').select(['endpoint_id', (eb) => eb.fn.countAll<number | string>().as('n')])
    .where('state', '=', 'pending').groupBy('endpoint_id').execute();
  return rows.map((row) => ({ endpointId: row.endpoint_id, count: Number(row.n) }));
}

/**
 * Deletes finished deliveries (delivered, or given up) made before `cutoff` (housekeeping). The
 * states are named, not "not pending", so that the index on (state, created_at) finds the rows.
 */
export async function deleteFinishedBefore(db: Kysely<DB>, cutoff: string): Promise<number> {
  const result = await db.deleteFrom('webhook_deliveries').where('state', 'in', ['delivered', 'failed'])
    .where('created_at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}
