import type { TurnObserver } from '../ports.ts';

/** Those told of every run on this runner (metrics). */
export class RunObservers {
  private readonly observers = new Set<TurnObserver>();
  private readonly report: (error: unknown, context: string) => void;

  constructor(report: (error: unknown, context: string) => void) {
    this.report = report;
  }

  /** Tells `observer` of every run from now on, until the returned function is called. */
  add(observer: TurnObserver): () => void {
    this.observers.add(observer);
    return () => { this.observers.delete(observer); };
  }

  /** An observer that throws is reported, never let to stop a run or the engine (metrics are not worth a turn). */
  tell(tell: (observer: TurnObserver) => void): void {
    for (const observer of this.observers) {
      try {
        tell(observer);
      } catch (error) {
        this.report(error, 'a turn observer (metrics)');
      }
    }
  }
}
