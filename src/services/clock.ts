/**
 * The time a record is stamped with (decided, updated, revoked): for reading, never compared or
 * ordered by across instances. A time that another instance compares (a lease, a window, an
 * expiry) or that a list is ordered by (agents, workspaces, pending actions, open questions)
 * comes from the store's shared clock instead (isoNowOf in store/shared-clock.ts).
 */
export const isoNow = (): string => new Date().toISOString();
