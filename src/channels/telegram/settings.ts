/** The Telegram channel's settings (docs/configuration.md, docs/telegram.md); null in Config: the channel is off. */
export interface TelegramSettings {
  /** TELEGRAM_BOT_TOKEN, from BotFather. Never logged. */
  botToken: string;
  /** TELEGRAM_API_ROOT: the Bot API server (Telegram's own, a self-hosted one, or a test's). */
  apiRoot: string;
  /** TELEGRAM_WEBHOOK_URL: null for long polling. */
  webhookUrl: string | null;
  /** TELEGRAM_WEBHOOK_SECRET: the secret Telegram sends with each webhook call; derived from the token when unset. */
  webhookSecret: string | null;
  /** TELEGRAM_LEASE_MS: how long the polling instance's lease lasts unrenewed before another takes over. */
  leaseMs: number;
  /** TELEGRAM_POLL_TIMEOUT_SECONDS: how long one getUpdates is held by Telegram. */
  pollTimeoutSeconds: number;
}

export const TELEGRAM_DEFAULT_API_ROOT = 'https://api.telegram.org';
/** The path the server takes webhook calls at; TELEGRAM_WEBHOOK_URL must reach it. */
export const TELEGRAM_WEBHOOK_PATH = '/telegram/webhook';
