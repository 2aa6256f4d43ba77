import type { ActionRef } from './brain.ts';

/**
 * The tool registry: every action kind says whether it needs a person's permission and how
 * it runs. A drafted action whose tool needs no permission is approved as it is recorded and
 * runs at once (the same path as an approval); one whose kind no tool runs is refused when
 * drafted. `run` gets the operation_id as its idempotency key: after a crash between
 * "executing" and "done" the same action runs again with the same key.
 */
export interface Tool {
  kind: string;
  needsPermission: boolean;
  description: string;
  run(action: ActionRef, idempotencyKey: string, signal: AbortSignal): Promise<void>;
}

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly fallback: ((kind: string) => Tool) | null;

  /** `fallback` makes a tool for a kind nobody registered (the built-in agent accepts any kind). */
  constructor(fallback: ((kind: string) => Tool) | null = null) {
    this.fallback = fallback;
  }

  register(tool: Tool): this {
    this.tools.set(tool.kind, tool);
    return this;
  }

  get(kind: string): Tool | undefined {
    return this.tools.get(kind) ?? this.fallback?.(kind);
  }

  list(): Tool[] {
    return [...this.tools.values()];
  }
}

/** The agent's reply when it drafted an action of a kind that no tool can run: nothing is drafted. */
export function noToolReply(kind: string): string {
  return `I can't do that: no tool can run "${kind}" actions, so nothing was drafted.`;
}

/** The reply naming a drafted action: it waits for a decision, or runs at once when its tool needs no permission. */
export function actionDraftedReply(action: { operationId: string; kind: string; summary: string }, needsPermission: boolean): string {
  return needsPermission
    ? `I need your permission to run "${action.kind}": ${action.summary} (operation_id ${action.operationId}). Approve or reject it.`
    : `Running "${action.kind}": ${action.summary} (operation_id ${action.operationId}); it needs no permission.`;
}

/** The reply to an action rejected without a reason: the mission stops there (contract §8). */
export const STOPPED_REPLY = 'Stopped.';

/**
 * The built-in agent's tools: any kind (the fallback), always behind permission (contract §8),
 * with no outside effect.
 */
export function builtinToolRegistry(): ToolRegistry {
  return new ToolRegistry((kind) => ({
    kind,
    needsPermission: true,
    description: `A "${kind}" action drafted by the built-in agent (it has no outside effect).`,
    run: async () => {},
  }));
}
