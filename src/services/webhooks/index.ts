import { newId, looksLikeId } from '../../domain/ids.ts';
import { Problem } from '../../domain/problems.ts';
import { newWebhookSecret, parseEventTypes } from '../../domain/webhooks.ts';
import type { FeedEventType } from '../../domain/feed-events.ts';
import {
  copyDelivery, countEndpointsOf, deleteFinishedBefore, pendingByEndpoint, deleteEndpoint, endpointOf, endpointsOf, insertEndpoint, recentDeliveries, setEndpointEnabled,
  type DeliveryRow, type EndpointRow,
} from '../../store/repos/webhooks.ts';
import { isoNowOf } from '../../store/shared-clock.ts';
import type { Store } from '../../store/store.ts';
import type { SecretBox } from './secret-box.ts';
import { hostProblem, writtenUrlProblem } from './url-safety.ts';

/** The most endpoints one account may have. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;
/** How many of an endpoint's latest deliveries are shown. */
export const RECENT_DELIVERIES_SHOWN = 50;

/** An endpoint as its owner sees it: never its secret. */
export interface EndpointView {
  id: string;
  url: string;
  events: FeedEventType[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  created_at: string;
  last_attempt_at: string | null;
  last_outcome: string | null;
}

export type DeliveryView = DeliveryRow;

export interface WebhooksDeps {
  store: Store;
  secrets: SecretBox;
  /** WEBHOOK_ALLOW_PRIVATE_URLS: http:// and private addresses allowed. */
  allowPrivateUrls: boolean;
  /** How long finished deliveries stay in the log (EVENT_RETENTION_HOURS, as their events). */
  retentionMs: number;
}

const viewOf = (row: EndpointRow): EndpointView => ({
  id: row.id, url: row.url, events: JSON.parse(row.events) as FeedEventType[], status: row.enabled ? 'enabled' : 'disabled',
  disabled_reason: row.disabled_reason, created_at: row.created_at, last_attempt_at: row.last_attempt_at, last_outcome: row.last_outcome,
});

const notFound = () => new Problem('not_found', 'No such webhook endpoint.');

/** An account's webhook endpoints (contract §9.5): registered, listed, disabled and enabled, deleted; their deliveries shown and sent again. */
export class WebhooksService {
  private readonly deps: WebhooksDeps;
  private wakeWorker: () => void = () => {};

  constructor(deps: WebhooksDeps) {
    this.deps = deps;
  }

  /** Who is told of a delivery made due outside a feed commit (a resend): the delivery worker. */
  onNewDelivery(wake: () => void): void {
    this.wakeWorker = wake;
  }

  get allowPrivateUrls(): boolean {
    return this.deps.allowPrivateUrls;
  }

  /**
   * Registers an endpoint; the secret is in the answer only, and kept sealed. The URL's name is
   * resolved last, once everything else is right: what is refused for its form, its written
   * address, its events or the account's limit is refused without a DNS lookup.
   */
  async create(userId: string, input: { url: string; events?: readonly string[] | string | undefined }): Promise<{ endpoint: EndpointView; secret: string }> {
    const url = input.url.trim();
    const errors: Array<{ path: string; message: string }> = [];
    const urlProblem = writtenUrlProblem(url, this.deps.allowPrivateUrls);
    if (urlProblem !== null) errors.push({ path: 'url', message: urlProblem });
    const events = parseEventTypes(input.events);
    if ('unknown' in events) errors.push({ path: 'events', message: `unknown event type ${events.unknown.slice(0, 3).map((t) => `"${t.slice(0, 40)}"`).join(', ')}: use the types of GET /events` });
    if (errors.length > 0) throw Problem.validation(errors);
    const { db } = this.deps.store;
    if (await countEndpointsOf(db, userId) >= MAX_ENDPOINTS_PER_ACCOUNT) {
      throw Problem.validation([{ path: 'url', message: `an account has at most ${MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints: delete one first` }]);
    }
    const hostRefusal = await hostProblem(new URL(url), this.deps.allowPrivateUrls);
    if (hostRefusal !== null) throw Problem.validation([{ path: 'url', message: hostRefusal }]);
    const id = newId('webhook');
    const secret = newWebhookSecret();
    const row: EndpointRow = {
      id, owner_user_id: userId, url, events: JSON.stringify((events as { types: FeedEventType[] }).types),
      sealed_secret: await this.deps.secrets.seal(id, secret), enabled: 1, disabled_reason: null,
      created_at: isoNowOf(this.deps.store.clock), last_attempt_at: null, last_outcome: null,
    };
    await insertEndpoint(db, row);
    return { endpoint: viewOf(row), secret };
  }

  async list(userId: string): Promise<EndpointView[]> {
    return (await endpointsOf(this.deps.store.db, userId)).map(viewOf);
  }

  /** The endpoint, or null when `userId` has none by that id (another's included). */
  async find(userId: string, id: string): Promise<EndpointView | null> {
    if (!looksLikeId('webhook', id)) return null;
    const row = await endpointOf(this.deps.store.db, userId, id);
    return row ? viewOf(row) : null;
  }

  async delete(userId: string, id: string): Promise<void> {
    if (!looksLikeId('webhook', id) || !(await deleteEndpoint(this.deps.store.db, userId, id))) throw notFound();
  }

  /** Enabling resumes the deliveries still pending; disabling holds them, and records none for new events. */
  async setEnabled(userId: string, id: string, enabled: boolean): Promise<void> {
    const done = looksLikeId('webhook', id) && await setEndpointEnabled(this.deps.store.db, userId, id, enabled, enabled ? null : 'Disabled by you.');
    if (!done) throw notFound();
  }

  async deliveries(userId: string, id: string): Promise<DeliveryView[]> {
    if (!(await this.find(userId, id))) throw notFound();
    return recentDeliveries(this.deps.store.db, id, RECENT_DELIVERIES_SHOWN);
  }

  /** Deliveries not yet made, by endpoint, of the whole deployment (a metric). */
  backlog(): Promise<Array<{ endpointId: string; count: number }>> {
    return pendingByEndpoint(this.deps.store.db);
  }

  /** Deletes finished deliveries (delivered, or given up) made longer than the retention before `now`; returns how many (housekeeping). */
  purgeFinished(now: number): Promise<number> {
    return deleteFinishedBefore(this.deps.store.db, new Date(now - this.deps.retentionMs).toISOString());
  }

  /** Sends an earlier delivery's event again, now, with its webhook-id (a new delivery in the log). */
  async resend(userId: string, id: string, deliveryId: number): Promise<void> {
    if (!(await this.find(userId, id))) throw notFound();
    if (!Number.isSafeInteger(deliveryId) || !(await copyDelivery(this.deps.store.db, id, deliveryId, isoNowOf(this.deps.store.clock)))) {
      throw new Problem('not_found', 'No such delivery.');
    }
    this.wakeWorker();
  }
}
