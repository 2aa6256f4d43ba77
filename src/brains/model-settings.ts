// The model's settings apart from the brain, so that reading them (config.ts) does not load the AI SDK.

export type ModelProvider = 'openai-compatible' | 'anthropic';

/** The model agents answer with (MODEL_* in config.ts, where each is checked). */
export interface ModelSettings {
  provider: ModelProvider;
  name: string;
  /** Null: the provider's own (Anthropic's API); openai-compatible always has one. */
  baseUrl: string | null;
  /** A secret: sent to the provider only, never logged nor put in an error or a turn. */
  apiKey: string | null;
  /** The longest one model call may take. */
  timeoutMs: number;
  /** Null: DEFAULT_SYSTEM_PROMPT. */
  systemPrompt: string | null;
  /**
   * The most characters of earlier turns sent with a unit of work (the oldest are left out
   * first); the unit of work itself always goes whole. Unset: DEFAULT_HISTORY_CHARACTERS.
   */
  historyCharacters?: number;
  /** The most tokens one answer may take; unset or null: the provider's (or the SDK's) default. */
  maxOutputTokens?: number | null;
}

/**
 * About 8,000 tokens of conversation: within the context of small local models, while a
 * session's 50 latest turns may hold 1.6 million characters (32,000 each) that no model takes.
 */
export const DEFAULT_HISTORY_CHARACTERS = 32_000;
