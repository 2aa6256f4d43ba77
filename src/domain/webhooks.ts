import { createHmac, randomBytes } from 'node:crypto';
import { FEED_EVENT_TYPES, type FeedEventType } from './feed-events.ts';

/**
 * Webhooks' vocabulary (contract §9.5): the secret's form, the Standard Webhooks signature, and
 * the retry schedule.
 */

export const WEBHOOK_SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` and 32 random bytes in base64, as Standard Webhooks libraries read it. */
export function newWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(32).toString('base64');
}

/**
 * The `webhook-signature` header of one attempt: `v1,` and the base64 HMAC-SHA256 of
 * `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the secret's decoded bytes.
 */
export function webhookSignature(secret: string, webhookId: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${webhookId}.${timestampSeconds}.${body}`).digest('base64')}`;
}

export const DEFAULT_RETRY_SCHEDULE = '5s,30s,2m,10m,1h,3h,6h,12h';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * WEBHOOK_RETRY_SCHEDULE → the pauses before each retry, in milliseconds: a comma-separated list
 * of durations such as `5s,30s,2m,1h` (units ms, s, m, h), 1 to 20 of them, each at most a day.
 */
export function parseRetrySchedule(raw: string): number[] {
  const parts = raw.split(',').map((part) => part.trim());
  const pauses = parts.map((part) => {
    const match = /^(\d{1,9})(ms|s|m|h)$/.exec(part);
    return match ? Number(match[1]) * UNIT_MS[match[2]!]! : Number.NaN;
  });
  if (parts.length === 0 || parts.length > 20 || pauses.some((ms) => !Number.isFinite(ms) || ms < 1 || ms > 86_400_000)) {
    throw new Error(`WEBHOOK_RETRY_SCHEDULE must be 1 to 20 comma-separated pauses such as ${DEFAULT_RETRY_SCHEDULE} (units ms, s, m, h; each at most 24h) (got "${raw}")`);
  }
  return pauses;
}

/**
 * The pause before retry number `retry` (0-based), null past the schedule: the scheduled pause
 * and up to 20 % more, never less (an endpoint is given at least the pause the operator set),
 * varied so that endpoints that failed together are not retried in one burst.
 */
export function retryPauseMs(schedule: readonly number[], retry: number, random: () => number = Math.random): number | null {
  const base = schedule[retry];
  if (base === undefined) return null;
  return Math.round(base * (1 + 0.2 * random()));
}

/** An endpoint's subscription: the types named (each of §9.3, none twice), or every type when none is named. */
export function parseEventTypes(value: readonly string[] | string | undefined): { types: FeedEventType[] } | { unknown: string[] } {
  const named = (typeof value === 'string' ? value.split(',') : value ?? []).map((type) => type.trim()).filter((type) => type !== '');
  if (named.length === 0) return { types: [...FEED_EVENT_TYPES] };
  const unknown = named.filter((type) => !(FEED_EVENT_TYPES as readonly string[]).includes(type));
  if (unknown.length > 0) return { unknown };
  return { types: FEED_EVENT_TYPES.filter((type) => named.includes(type)) };
}

/** How an attempt ended: delivered, to be retried, or the last of the schedule (the endpoint disabled). */
export const DELIVERY_OUTCOMES = ['delivered', 'retrying', 'gave_up'] as const;
export type DeliveryOutcome = typeof DELIVERY_OUTCOMES[number];

/** Hears of each delivery attempt (the metrics). */
export interface DeliveryObserver {
  attempted(outcome: DeliveryOutcome, durationMs: number): void;
}
