/**
 * This machine's clock, for a stamp that people read and no instance compares or orders by
 * (decided, updated, revoked): any instance's clock will do for it. A time that another instance
 * compares (a lease, a window, an expiry) or that a list is ordered by (agents, workspaces,
 * pending actions, open questions) must come from the clock every instance shares instead:
 * isoNowOf(store.clock), in store/shared-clock.ts.
 */
export const localIsoNow = (): string => new Date().toISOString();
