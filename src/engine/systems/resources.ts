import type { Store } from '../../store/store.ts';
import type { Bus } from '../bus.ts';
import type { JobHandler } from '../ports.ts';
import type { RepeatableWork } from '../unit-of-work.ts';
import type { Slots } from './slots.ts';

/** This runner's settings, fixed at construction. */
export interface RunnerSettings {
  instanceId: string;
  /** Jobs running at once per agent (the contract's "one turn at a time" is 1). */
  perAgent: number;
  /** Jobs this runner runs at once, across agents. */
  concurrency: number;
  leaseMs: number;
  /** A job claimed this many times (its runner kept dying) is failed instead of retried. */
  maxAttempts: number;
}

/** Whether this instance runs jobs now: it has a handler, has started, and is not stopping. */
export class RunnerState {
  handler: JobHandler | null = null;
  started = false;
  stopping = false;

  get takesWork(): boolean {
    return this.handler !== null && this.started && !this.stopping;
  }
}

/** What every system of the engine shares; the TurnEngine builds it once and hands it to each. */
export interface EngineResources {
  readonly store: Store;
  readonly bus: Bus;
  readonly settings: RunnerSettings;
  readonly runner: RunnerState;
  readonly slots: Slots;
  transact<T>(work: RepeatableWork<T>): Promise<T>;
  /** Errors no caller can be told of (timers, runs, hooks): reported, never thrown. */
  report(error: unknown, context: string): void;
  /** The time leases are written and compared by: the store's, which every instance shares. */
  now(): number;
}
